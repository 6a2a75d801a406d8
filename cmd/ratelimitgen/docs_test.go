package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// docFiles returns the Markdown files of the module's documentation: the
// README and the guides under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	guides, err := filepath.Glob(filepath.Join(moduleRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(guides) == 0 {
		t.Fatal("no guides under docs/")
	}
	return append([]string{filepath.Join(moduleRoot, "README.md")}, guides...)
}

// builtFiles returns the Go files the docs show to build as written: each
// ```go block after a line <!-- builds as PATH: ... -->, by PATH.
func builtFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, doc := range docFiles(t) {
		for _, m := range docBuilds.FindAllStringSubmatch(readFile(t, doc), -1) {
			files[m[1]] = m[2]
		}
	}
	return files
}

var docBuilds = regexp.MustCompile("(?s)<!-- builds as (\\S+): [^>]*-->\n```go\n(.*?)```\n")

// TestDocsGRPCBuilds writes the gRPC file of docs/grpc.md, as written, into a
// new module with the packages it names (the helloworld service as
// protoc-gen-go and protoc-gen-go-grpc generate it, and an auth package),
// then generates, builds and vets it (issue 19 item 3: a key function of
// another package works with the import the user writes, and protobuf
// getters are keys and costs). The module gets its requirements through
// the module proxy on a machine that lacks them.
func TestDocsGRPCBuilds(t *testing.T) {
	t.Parallel() // with TestGeneratedCodeBehaves: each waits on go commands of its own
	root, err := filepath.Abs(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	greeter, ok := builtFiles(t)["greeter/greeter.go"]
	if !ok {
		t.Fatal("no doc has a <!-- builds as greeter/greeter.go: ... --> block")
	}
	pbDir := filepath.Join(root, "testdata", "grpc", "greeterpb")
	files := map[string]string{
		"go.mod": "module example.com/svc\n\ngo 1.26.0\n\nrequire (\n\tgithub.com/ratelimitgen/ratelimitgen v0.0.0\n" +
			"\tgoogle.golang.org/grpc v1.85.0\n\tgoogle.golang.org/protobuf v1.36.12\n)\n\n" +
			"replace github.com/ratelimitgen/ratelimitgen => " + root + "\n\n" +
			"tool github.com/ratelimitgen/ratelimitgen/cmd/ratelimitgen\n",
		"go.sum":                       readFile(t, filepath.Join(root, "testdata", "grpc", "go.sum")),
		"greeterpb/greeter.pb.go":      readFile(t, filepath.Join(pbDir, "greeter.pb.go")),
		"greeterpb/greeter_grpc.pb.go": readFile(t, filepath.Join(pbDir, "greeter_grpc.pb.go")),
		"greeter/greeter.go":           greeter,
		"auth/auth.go":                 docAuth,
		"cmd/server/main.go":           docServer,
	}
	dir := t.TempDir()
	writeFiles(t, dir, files)
	goCmd(t, dir, "mod", "tidy")
	goCmd(t, dir, "generate", "./...")
	if got := readFile(t, filepath.Join(dir, "greeter", "ratelimit_gen.go")); !strings.Contains(got, "auth.Principal(ctx)") ||
		!strings.Contains(got, "req.GetName()") || !strings.Contains(got, "int64(req.GetCount())") {
		t.Errorf("the generated file does not call auth.Principal(ctx), req.GetName() and req.GetCount():\n%s", got)
	}
	goCmd(t, dir, "tool", "ratelimitgen", "-check", "./...")
	goCmd(t, dir, "build", "./...")
	goCmd(t, dir, "vet", "./...")
}

// docAuth is the auth package the docs' gRPC file calls.
const docAuth = `// Package auth names the caller of a gRPC call.
package auth

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Principal returns the caller the x-user metadata names.
func Principal(ctx context.Context) (string, error) {
	if v := metadata.ValueFromIncomingContext(ctx, "x-user"); len(v) > 0 && v[0] != "" {
		return v[0], nil
	}
	return "", status.Error(codes.Unauthenticated, "missing x-user")
}
`

// docServer registers the docs' decorator, as docs/grpc.md says.
const docServer = `package main

import (
	"google.golang.org/grpc"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"

	"example.com/svc/greeter"
	pb "example.com/svc/greeterpb"
)

type server struct{ pb.UnimplementedGreeterServer }

func main() {
	s := grpc.NewServer()
	pb.RegisterGreeterServer(s, greeter.NewLimitedGreeterWithRateLimit(server{}, ratelimit.NewMemory()))
}
`

// requireContains fails the test for each of wants that the doc at path,
// a path under the module's root, lacks.
func requireContains(t *testing.T, path string, wants ...string) {
	t.Helper()
	doc := readFile(t, filepath.Join(moduleRoot, filepath.FromSlash(path)))
	for _, want := range wants {
		if !strings.Contains(doc, want) {
			t.Errorf("%s lacks %q", path, want)
		}
	}
}

// TestDocsDocumentKeysTypeLimitsAndSecrets: the guide to keys lists what a
// key or a cost may be and the signatures of their functions, and the
// setting that keeps secrets out of Redis key names and logs; the
// directive reference explains limits on a type and installs ratelimitvet
// with a version, which works outside a module, as every doc does (issue
// 19 item 5).
func TestDocsDocumentKeysTypeLimitsAndSecrets(t *testing.T) {
	requireContains(t, "docs/keys-and-costs.md",
		"## Keys and costs", "key=req.GetOrder().GetTenant()", "cost=len(req.Skus)",
		"func principal(ctx context.Context) string", "func Principal(ctx context.Context) (string, error)",
		`_ "example.com/svc/auth"`,
		"## Secrets in keys", "keyhash=true", "ratelimit.KeyDigest")
	requireContains(t, "docs/directives.md",
		"## Limits on a type", "go install github.com/ratelimitgen/ratelimitgen/cmd/ratelimitvet@latest")
	for _, doc := range docFiles(t) {
		for _, line := range strings.Split(readFile(t, doc), "\n") {
			if strings.HasPrefix(line, "go install github.com/ratelimitgen/") && !strings.Contains(line, "@") {
				t.Errorf("%s installs without a version, which works only in a module that requires this one: %s", doc, line)
			}
		}
	}
}

// TestDocsDocumentKeysPerLine: the example of two limits on one method in
// the guide to keys is the one testdata/linekeys generates and tests with
// many users (10 a second for each, 1,000 an hour in all), and the guide
// says what a key per line changed and how to write the old meaning
// (issue 21 items 1, 2 and 5).
func TestDocsDocumentKeysPerLine(t *testing.T) {
	const guide = "docs/keys-and-costs.md"
	example := "\t//ratelimit:period=1 threshold=10 key=user\n\t//ratelimit:period=1h threshold=1000\n" +
		"\tPost(ctx context.Context, user, text string) error\n"
	requireContains(t, guide, example)
	requireContains(t, "testdata/linekeys/linekeys.go", example)
	requireContains(t, guide,
		"## A key per line", "**What changed.**", "write `key=` on every line",
		"//ratelimit:period=1h threshold=1000 key=user", "rule.Check(ctx, limiter, 1, user, \"\")", "KeyExprs")
}
