package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// synthesize returns a package with the given number of interfaces, each
// with the given number of annotated methods of assorted shapes.
func synthesize(interfaces, methods int) string {
	var b strings.Builder
	b.WriteString("package large\n\nimport \"context\"\n\n// Item is a result.\ntype Item struct{ ID string }\n\n// Req is keyed by its user.\ntype Req struct{ User *User }\n\n// User has an id.\ntype User struct{ ID int64 }\n")
	for i := range interfaces {
		fmt.Fprintf(&b, "\n// Service%d is synthesized.\ntype Service%d interface {\n", i, i)
		for j := range methods {
			switch j % 4 {
			case 0:
				fmt.Fprintf(&b, "\t//ratelimit:period=30 threshold=%d key=id\n\tGet%d(ctx context.Context, id string) (*Item, error)\n", j+1, j)
			case 1:
				fmt.Fprintf(&b, "\t//ratelimit:period=1 threshold=10 key=req.User.ID\n\t//ratelimit:period=1m threshold=100\n\tPut%d(ctx context.Context, req *Req, items ...Item) (int, error)\n", j)
			case 2:
				fmt.Fprintf(&b, "\t//ratelimit:period=500ms threshold=3 cost=n\n\tCount%d(n int, prefix string) (map[string]int, error)\n", j)
			default:
				fmt.Fprintf(&b, "\t//ratelimit:period=2h threshold=1000 name=shared%d\n\tDo%d(context.Context) error\n", j, j)
			}
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// BenchmarkGenerate1000Methods measures a whole run (load, check, render,
// write) over 1,000 annotated methods on 50 interfaces.
func BenchmarkGenerate1000Methods(b *testing.B) {
	dir := tempModule(b, map[string]string{"large/large.go": synthesize(50, 20)})
	gen := filepath.Join(dir, "large", "ratelimit_gen.go")
	for b.Loop() {
		b.StopTimer()
		os.Remove(gen)
		b.StartTimer()
		if code, _, stderr := cli(b, "-C", dir, "./..."); code != exitOK {
			b.Fatalf("exit %d\n%s", code, stderr)
		}
	}
}

// TestLargePackage generates the benchmark's package inside this module,
// so that its code can import the runtime, logs the wall time of the whole
// run (speed is judged by BenchmarkGenerate1000Methods, not here), and
// checks that the result compiles and vets.
func TestLargePackage(t *testing.T) {
	parent, err := filepath.Abs(filepath.Join(moduleRoot, "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(parent, "tmp-large-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	writeFiles(t, dir, map[string]string{"large.go": synthesize(50, 20)})

	start := time.Now()
	code, _, stderr := cli(t, dir)
	elapsed := time.Since(start)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	t.Logf("generated 1,000 methods on 50 interfaces in %v (%d bytes)", elapsed.Round(time.Millisecond), len(readFile(t, filepath.Join(dir, "ratelimit_gen.go"))))
	cmd := exec.Command("go", "vet", ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go vet of the generated package: %v\n%s", err, out)
	}
}
