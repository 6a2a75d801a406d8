package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated files and diagnostics.golden files under testdata")

// goldenCases are the packages under testdata whose committed
// ratelimit_gen.go is the expected output.
var goldenCases = []string{"algorithms", "basic", "buildtags", "calendar", "collisions", "concrete", "concurrency", "cooldown", "embedded", "foreign", "generics", "getters", "keys", "linekeys", "options", "settle", "shared", "unexported"}

// TestGolden checks that generating each golden package reproduces its
// committed ratelimit_gen.go byte for byte (-update rewrites them).
func TestGolden(t *testing.T) {
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := testdataDir(t, name)
			if *update {
				if code, _, stderr := cli(t, dir); code != exitOK {
					t.Fatalf("generating %s: exit %d\n%s", name, code, stderr)
				}
			}
			code, stdout, stderr := cli(t, "-check", dir)
			if code != exitOK {
				t.Errorf("testdata/%s/ratelimit_gen.go is not what the generator writes (go test -update rewrites it); exit %d\n%s%s", name, code, stdout, stderr)
			}
		})
	}
}

// errorCases are the packages under testdata/errors, each with the
// diagnostics it must produce in diagnostics.golden.
var errorCases = []string{"calendar", "concurrency", "constraints", "keys", "names", "nearmiss", "placement", "prefetch", "settle", "shared", "signature", "syntax", "typeerror"}

func TestDiagnostics(t *testing.T) {
	for _, name := range errorCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := testdataDir(t, filepath.Join("errors", name))
			code, stdout, stderr := cli(t, dir)
			if code != exitError {
				t.Errorf("exit code %d, want %d", code, exitError)
			}
			if stdout != "" {
				t.Errorf("stdout: %q, want nothing", stdout)
			}
			got := strings.ReplaceAll(stderr, dir+string(filepath.Separator), "")
			golden := filepath.Join(dir, "diagnostics.golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if want := readFile(t, golden); got != want {
				t.Errorf("diagnostics differ from %s (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
			if exists(filepath.Join(dir, "ratelimit_gen.go")) {
				t.Errorf("a generated file was written despite the errors")
			}
		})
	}
}

// TestGeneratedCodeBehaves runs the behaviour tests that sit beside the
// generated files in testdata (go test ignores testdata in ./..., so they
// are run here): every decorator on the memory limiter and on a real Redis.
func TestGeneratedCodeBehaves(t *testing.T) {
	t.Parallel() // with TestDocsGRPCBuilds: each waits on go commands of its own
	args := []string{"test", "-race", "-count=1"}
	for _, name := range goldenCases {
		args = append(args, "./testdata/"+name)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = moduleRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("go %s:\n%s", strings.Join(args, " "), out)
}
