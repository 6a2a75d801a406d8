package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunFormsSurviveTidy follows the README in a new service module that
// uses this checkout (through a replace): both ways of running the
// generator, the go tool form and the go run form with a tools.go, still
// generate after go mod tidy, even when tidy ran while the generated file
// was missing.
func TestRunFormsSurviveTidy(t *testing.T) {
	root, err := filepath.Abs(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	mod := "module example.com/svc\n\ngo 1.26.0\n\nrequire github.com/ratelimitgen/ratelimitgen v0.0.0\n\n" +
		"replace github.com/ratelimitgen/ratelimitgen => " + root + "\n"
	store := func(generate string) string {
		return "package store\n\nimport \"context\"\n\n//go:generate " + generate + "\n\n" +
			"// Store is limited.\ntype Store interface {\n\t//ratelimit:period=30 threshold=2 key=id\n" +
			"\tGet(ctx context.Context, id string) (string, error)\n}\n"
	}
	for name, files := range map[string]map[string]string{
		"go tool": {
			"go.mod":         mod + "\ntool github.com/ratelimitgen/ratelimitgen/cmd/ratelimitgen\n",
			"store/store.go": store("go tool ratelimitgen"),
		},
		"go run with tools.go": {
			"go.mod":         mod,
			"tools.go":       "//go:build tools\n\npackage tools\n\nimport _ \"github.com/ratelimitgen/ratelimitgen/cmd/ratelimitgen\"\n",
			"store/store.go": store("go run github.com/ratelimitgen/ratelimitgen/cmd/ratelimitgen"),
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFiles(t, dir, files)
			gen := filepath.Join(dir, "store", "ratelimit_gen.go")
			goCmd(t, dir, "mod", "tidy")
			goCmd(t, dir, "generate", "./...")
			if !exists(gen) {
				t.Fatal("go generate wrote no file")
			}
			if err := os.Remove(gen); err != nil {
				t.Fatal(err)
			}
			goCmd(t, dir, "mod", "tidy")
			goCmd(t, dir, "generate", "./...")
			goCmd(t, dir, "mod", "tidy")
			goCmd(t, dir, "build", "./...")
		})
	}
}

// goCmd runs the go command in dir. It may download through the
// environment's module proxy: tidy wants the modules of its dependencies'
// tests, which a fresh machine's cache lacks, and checks new go.sum lines
// with the checksum database, which it reaches through the proxy.
func goCmd(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
