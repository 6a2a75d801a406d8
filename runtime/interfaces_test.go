package ratelimit

import (
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// maxInterfaces bounds the exported interfaces of packages ratelimit and
// guard together, hooks included (issue 36): what a backend supports is a
// value it reports, not an interface found on it.
const maxInterfaces = 12

// TestExportedInterfacesAreBounded counts the exported types of packages
// ratelimit and guard whose underlying type is an interface (aliases too),
// as their export data (no test file) declares them.
func TestExportedInterfacesAreBounded(t *testing.T) {
	out, err := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}", ".", "./guard").Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	exports := map[string]string{}
	for _, line := range strings.Fields(string(out)) {
		path, file, _ := strings.Cut(line, "=")
		exports[path] = file
	}
	lookup := func(path string) (io.ReadCloser, error) { return os.Open(exports[path]) }
	imp := importer.ForCompiler(token.NewFileSet(), "gc", lookup)
	var names []string
	for _, path := range []string{"github.com/ratelimitgen/ratelimitgen/runtime", "github.com/ratelimitgen/ratelimitgen/runtime/guard"} {
		pkg, err := imp.Import(path)
		if err != nil {
			t.Fatalf("import %s: %v", path, err)
		}
		for _, name := range pkg.Scope().Names() {
			if obj, ok := pkg.Scope().Lookup(name).(*types.TypeName); ok && obj.Exported() && types.IsInterface(obj.Type()) {
				names = append(names, pkg.Name()+"."+name)
			}
		}
	}
	slices.Sort(names)
	t.Logf("%d exported interfaces: %s", len(names), strings.Join(names, ", "))
	if len(names) > maxInterfaces {
		t.Errorf("packages ratelimit and guard export %d interfaces, want at most %d: %s", len(names), maxInterfaces, strings.Join(names, ", "))
	}
}
