package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// TestGoVetRunsIt builds ratelimitvet and runs it as go vet's -vettool on
// the analyzer's test module: go vet fails and prints each diagnostic as
// file:line:col: message, and nothing for the package that is fresh.
func TestGoVetRunsIt(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ratelimitvet")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	vet := exec.Command("go", "vet", "-vettool="+bin, "./...")
	vet.Dir = filepath.Join("..", "..", "analyzer", "testdata")
	out, err := vet.CombinedOutput()
	if err == nil {
		t.Fatalf("go vet succeeded; want the diagnostics:\n%s", out)
	}
	for _, want := range []string{
		`bad/bad.go:12:23: unknown name "threshhold"; did you mean threshold?`,
		"bad/bad.go:7:6: StoreWithRateLimit is declared here",
		"bad/bad.go:10:6: \ttype Store is decorated", // a related position, as go vet prints them
		"missing/missing.go:7:2: missing generated code for Store: run go generate (ratelimitgen)",
		"stale/stale.go:13:2: ratelimit_gen.go is stale: its code for Store.Put differs from this directive; run go generate (ratelimitgen)",
		"renamed/renamed.go:16:9: undefined: NewStoreWithRateLimit",
		"migrated/migrated.go:12:2: ratelimit_gen.go is stale: its code for Feed.Post differs from this directive; " +
			"each line has its own key= now: the line at migrated.go:13:2 has none and limits every call together " +
			"(it limited each user before: write key=user on it to keep that); run go generate (ratelimitgen)",
	} {
		if !strings.Contains(string(out), filepath.FromSlash(want)) {
			t.Errorf("go vet output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "fresh") {
		t.Errorf("go vet reported the fresh package:\n%s", out)
	}
}

// TestGoVetReportsTypeErrors: a package with directives that does not
// type-check (issue 19: a .proto change left an interface with a
// duplicate method) fails go vet with the error at its position.
func TestGoVetReportsTypeErrors(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ratelimitvet")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The package's name starts with "_", so that ./... (the repository's
	// own vet of this module) passes it by.
	vet := exec.Command("go", "vet", "-vettool="+bin, "./_typeerror")
	vet.Dir = filepath.Join("..", "..", "analyzer", "testdata")
	out, err := vet.CombinedOutput()
	if err == nil {
		t.Fatalf("go vet succeeded on a package that does not type-check:\n%s", out)
	}
	if want := filepath.FromSlash("_typeerror/typeerror.go:14:2: duplicate method GetItems"); !strings.Contains(string(out), want) {
		t.Errorf("go vet output lacks %q:\n%s", want, out)
	}
}

// TestInstallWithAVersion: the README's go install …/ratelimitvet@<version>
// works outside any module (issue 19 item 5: without a version it worked
// only in a module that already required this one). The module, as this
// checkout holds it, is served as v0.0.1 by a module proxy in a directory;
// the other modules come from the module cache's downloads, else from the
// usual proxy, into a module cache of the test's own, so that the fake
// version never reaches the real one.
func TestInstallWithAVersion(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	const path, version = "github.com/ratelimitgen/ratelimitgen", "v0.0.1"
	proxy := t.TempDir()
	at := filepath.Join(proxy, filepath.FromSlash(path), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	zf, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	// The files git tracks, as the working tree holds them: other tests
	// make and remove scratch files in the checkout meanwhile.
	if err := modzip.Create(zf, module.Version{Path: path, Version: version}, trackedFiles(t, root)); err != nil {
		t.Fatalf("zipping the module: %v", err)
	}
	if err := zf.Close(); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		version + ".mod":  gomod,
		version + ".info": []byte(`{"Version":"` + version + `","Time":"2026-01-01T00:00:00Z"}`),
		"list":            []byte(version + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	outside, bin, cache := t.TempDir(), t.TempDir(), t.TempDir()
	downloads := filepath.Join(goEnv(t, "GOMODCACHE"), "cache", "download")
	install := exec.Command("go", "install", path+"/cmd/ratelimitvet@"+version)
	install.Dir = outside
	install.Env = append(os.Environ(),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(downloads)+","+goEnv(t, "GOPROXY"),
		"GONOSUMDB="+path, // served here only, so not in the checksum database
		"GOMODCACHE="+cache,
		"GOFLAGS=-modcacherw", // so that the test's cache can be removed
		"GOWORK=off", "GOBIN="+bin)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install outside a module: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(bin, "ratelimitvet"), "-V=full").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ratelimitvet version") {
		t.Fatalf("the installed ratelimitvet -V=full: %v\n%s", err, out)
	}
}

// goEnv returns the go command's setting of the environment variable key.
func goEnv(t *testing.T, key string) string {
	t.Helper()
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", key, err)
	}
	return strings.TrimSpace(string(out))
}

// trackedFile is a file of the checkout that git tracks, for modzip.Create.
type trackedFile struct{ root, rel string }

func (f trackedFile) Path() string                 { return filepath.ToSlash(f.rel) }
func (f trackedFile) Lstat() (os.FileInfo, error)  { return os.Lstat(filepath.Join(f.root, f.rel)) }
func (f trackedFile) Open() (io.ReadCloser, error) { return os.Open(filepath.Join(f.root, f.rel)) }

// trackedFiles returns the files git tracks under root that exist in the
// working tree.
func trackedFiles(t *testing.T, root string) []modzip.File {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("git ls-files: %v", err)
	}
	var files []modzip.File
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if _, err := os.Lstat(filepath.Join(root, rel)); err == nil {
			files = append(files, trackedFile{root, rel})
		}
	}
	return files
}

// TestOnItsOwnReportsAnOlderVersionsFile: a generated file of an older
// version, which calls Rule.Check with the key before the cost and so no
// longer compiles, is reported stale with the fix by ratelimitvet run on
// its own (the analyzer runs despite the type errors of the generated
// file), after the type errors; go vet stops at the type errors.
func TestOnItsOwnReportsAnOlderVersionsFile(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ratelimitvet")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := exec.Command(bin, "./_olderversion")
	run.Dir = filepath.Join("..", "..", "analyzer", "testdata")
	out, err := run.CombinedOutput()
	if err == nil {
		t.Fatalf("ratelimitvet succeeded on an older version's generated file:\n%s", out)
	}
	for _, want := range []string{
		"_olderversion/ratelimit_gen.go:40:52: cannot use id (variable of type string) as int64 value in argument to storeGetRateLimit.Check",
		"_olderversion/olderversion.go:12:2: ratelimit_gen.go is stale: its code for Store.Get differs from this directive; run go generate (ratelimitgen)",
	} {
		if !strings.Contains(string(out), filepath.FromSlash(want)) {
			t.Errorf("ratelimitvet output lacks %q:\n%s", want, out)
		}
	}
}
