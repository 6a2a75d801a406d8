package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// moduleRoot is the repository root, relative to this package.
const moduleRoot = "../.."

// cli runs ratelimitgen in-process with args and returns the exit code and
// what it printed.
func cli(t testing.TB, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// testdataDir returns the absolute path of testdata/<name>.
func testdataDir(t testing.TB, name string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join(moduleRoot, "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// tempModule writes files (path → content) into a new module
// example.com/m in a temporary directory and returns the directory.
func tempModule(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"go.mod": "module example.com/m\n\ngo 1.26\n"})
	writeFiles(t, dir, files)
	return dir
}

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
