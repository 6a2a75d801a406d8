package guard

import (
	"os/exec"
	"strings"
	"testing"
)

// TestGuardsImportNoBackend: the guards use only the backend contract of
// package ratelimit and their own capabilities, and link no backend's
// client.
func TestGuardsImportNoBackend(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/redis/go-redis") || strings.HasSuffix(dep, "/redislimit") || dep == "net/http" {
			t.Errorf("package guard depends on %s", dep)
		}
	}
}
