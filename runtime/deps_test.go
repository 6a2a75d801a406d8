package ratelimit

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreImportsNeitherRedisNorHTTP: the package that generated code
// imports links neither go-redis nor net/http, which live in redislimit
// and httplimit.
func TestCoreImportsNeitherRedisNorHTTP(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/redis/go-redis") || dep == "net/http" {
			t.Errorf("package ratelimit depends on %s", dep)
		}
	}
}
