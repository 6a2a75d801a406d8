package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	vet := exec.Command("go", "vet", "-vettool="+bin, "./typeerror")
	vet.Dir = filepath.Join("..", "..", "analyzer", "testdata")
	out, err := vet.CombinedOutput()
	if err == nil {
		t.Fatalf("go vet succeeded on a package that does not type-check:\n%s", out)
	}
	if want := filepath.FromSlash("typeerror/typeerror.go:14:2: duplicate method GetItems"); !strings.Contains(string(out), want) {
		t.Errorf("go vet output lacks %q:\n%s", want, out)
	}
}
