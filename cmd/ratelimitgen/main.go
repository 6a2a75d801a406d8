// Ratelimitgen generates rate-limiting decorators from //ratelimit:
// directives.
//
// Write a directive in the doc comment of a method:
//
//	type Store interface {
//		// Get returns the item with the given id.
//		//ratelimit:period=30 threshold=2 key=id
//		Get(ctx context.Context, id string) (*Item, error)
//		Close() error
//	}
//
// and run ratelimitgen in the package (usually through go generate). It
// writes ratelimit_gen.go with a decorator:
//
//	type StoreWithRateLimit struct { ... }
//	func NewStoreWithRateLimit(next Store, limiter ratelimit.Limiter) *StoreWithRateLimit
//
// StoreWithRateLimit implements Store. Its Get asks the limiter to admit
// the call first: at most 2 calls per 30 seconds for each id. A denied call
// returns zero values and a *ratelimit.LimitError, for which
// errors.Is(err, ratelimit.ErrLimited) holds and which says when to retry
// (RetryAfter). Close is not limited and calls the wrapped Store directly.
// The limiter is ratelimit.NewMemory() for one process or
// redislimit.New(client) for limits shared by every process; ratelimit
// is the package github.com/ratelimitgen/ratelimitgen/runtime, redislimit
// its subpackage runtime/redislimit.
//
// # Running it
//
// Track the generator as a tool of your module (Go 1.24+):
//
//	go get -tool github.com/ratelimitgen/ratelimitgen/cmd/ratelimitgen
//
// and add one line to any file of the package:
//
//	//go:generate go tool ratelimitgen
//
// The tool directive keeps the generator's requirements in go.mod through
// go mod tidy. The form
//
//	//go:generate go run github.com/ratelimitgen/ratelimitgen/cmd/ratelimitgen
//
// works too, but go mod tidy drops the requirements only the generator
// needs unless a file of the module imports it, such as a tools.go with
// "//go:build tools" and import _ "github.com/ratelimitgen/ratelimitgen/cmd/ratelimitgen".
//
// Usage:
//
//	ratelimitgen [-C dir] [-output file] [-tags list] [-check] [-list [-json]] [packages]
//
// The packages are import paths or patterns, as for go build; the default
// is the package in the current directory. All of them are loaded at once.
// Each package with directives gets one generated file in its directory;
// packages without directives are skipped silently. The flags are:
//
//	-C dir
//		change to dir before doing anything, like go -C
//	-output name
//		file name of the generated file in each package directory
//		(default ratelimit_gen.go)
//	-tags list
//		comma-separated build tags to load the packages with, added to
//		the -tags of $GOFLAGS
//	-check
//		write nothing; print a unified diff for every generated file that
//		is missing, stale or should be deleted, and exit 1 if there is one;
//		for code generated before each directive line had its own key=,
//		say at the directive which lines changed meaning
//	-list
//		write nothing; print every limit found as a table: position,
//		Type.Method, name, period, threshold, the line's key (- for
//		none: one limit for every call), cost, algorithm and the other
//		options (burst=, capacity=, wait=, onerror=, shadow=, and the
//		line's emptykey= and keyhash=)
//	-json
//		with -list, print the limits as a JSON array instead
//
// The exit status is 0 on success, 1 when there are diagnostics (or, with
// -check, stale files) and 2 for a usage error.
//
// # Directives
//
// A directive is a line comment that starts exactly with "//ratelimit:",
// followed by name=value pairs, in the doc comment of a method or of a
// named type:
//
//	//ratelimit:period=30 threshold=2
//	//ratelimit:period=1m30s threshold=100 key=req.User.ID name=search cost=n
//
// Several lines on one method are several limits that must all admit a
// call. The directives (the syntax, every name with its values and
// default, where a directive goes, the rules between the lines of a
// method, what a limited method must look like, and the mistakes
// reported) are documented once, in docs/directives.md at the root of this
// module.
//
// Every mistake is reported as file:line:col: message, all of them sorted
// by position; when there is any, nothing is written. A package with
// directives must type-check: its type errors are reported too (generate,
// -check and -list exit 1), but for the uses of what generated files
// declare, which the generator does not load (see below).
//
// # Generated code
//
// For an interface Store, the file declares StoreWithRateLimit and
// NewStoreWithRateLimit (storeWithRateLimit and newStoreWithRateLimit for
// an unexported store), implementing every method of Store; a generic
// interface gets a generic decorator with the same type parameters. For
// any other named type Bar with limited methods, it declares
//
//	type BarWithRateLimit struct { *Bar; ... }
//	func NewBarWithRateLimit(next *Bar, limiter ratelimit.Limiter) *BarWithRateLimit
//
// overriding the limited methods; the others are promoted from *Bar. Only
// calls through the decorator are limited: a method of Bar that calls
// another method of Bar bypasses the limit. An interface whose method set
// has a method only another package can implement (unexported there, as
// protoc-gen-go-grpc's mustEmbedUnimplementedFooServer) gets such a
// decorator too, embedding the interface. For every interface of another
// package that the decorated interface embeds, the file asserts that the
// decorator implements it. Each limited method's rule is a package
// variable (storeGetRateLimit), and every generated file declares
//
//	func RateLimitRules() []*ratelimit.Rule
//
// which returns copies of the package's rules, for an operator's view
// (httplimit.AdminHandler). A decorated call whose context comes from
// ratelimit.WithAdmission records its admission there (the limit with the
// fewest units left, what remains and when it resets), for the RateLimit
// header fields of an admitted response (httplimit.SetAdmissionHeaders).
//
// To limit an interface you do not own, declare one that embeds it and
// redeclares the methods to limit, with their directives: for a
// LimitedGreeter that embeds pb.GreeterServer,
// NewLimitedGreeterWithRateLimit(impl, limiter) takes any pb.GreeterServer
// and is one, for pb.RegisterGreeterServer (docs/grpc.md shows it whole).
//
// The decorator's name, its constructor's and RateLimitRules never clash
// with a declaration of the package: such a clash is an error (see
// docs/directives.md); the other, unexported names get a number instead.
//
// The generated file starts with "// Code generated by ratelimitgen. DO
// NOT EDIT." and "//go:build !ratelimitgen", and ratelimitgen loads
// packages with the ratelimitgen build tag, so stale generated code (a
// decorator of a method that no longer exists) never stops it from
// running again. When the decorated types are declared in files with a
// build constraint (a //go:build line or a _GOOS or _GOARCH file name),
// the generated file carries that constraint too; decorated types of one
// package under different constraints are an error, as one generated file
// cannot serve both. Files excluded by the build configuration are not
// read: use -tags to generate for them. A file
// is written only when its content changes; a package whose directives
// were all removed has its generated file deleted. A file at the output
// path that was not generated by ratelimitgen is never overwritten.
package main

import (
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // diagnostics, stale files, failures
	exitUsage = 2
)

// run runs ratelimitgen with the command-line arguments args (without the
// program name) and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	opts, code := parseFlags(args, stderr)
	if opts == nil {
		return code
	}
	g := &generator{opts: *opts, stdout: stdout, stderr: stderr}
	return g.run()
}
