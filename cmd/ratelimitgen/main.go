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
// followed by name=value pairs:
//
//	//ratelimit:period=30 threshold=2
//	//ratelimit:period=1m30s threshold=100 key=req.User.ID name=search cost=n
//
// It belongs in the doc comment of an interface method, of a method
// declaration (func (s *Server) Search...), or of a named type declaration,
// where it applies to every method of the type (every method of an
// interface's method set, including embedded ones; every method declared
// on any other type) that has no directive of its own. A method's own
// directives go with it: an interface that embeds another interface of the
// package limits the embedded methods as their directives say, under the
// same limit name, so both decorators share the limit. A directive
// anywhere else (on a function, a field, a variable, the package clause,
// an alias, a grouped type declaration...) is an error.
//
// Several directive lines on one method are several limits that must all
// admit a call; nothing is charged unless all do. Each line gives one
// limit, with its own key:
//
//	period      the window: whole seconds (30) or a Go duration (500ms, 1m30s)
//	threshold   calls (or units of cost) admitted per period
//	algorithm   sliding_log (the default), or another algorithm the runtime supports
//	burst       bucket capacity (token_bucket, gcra)
//	capacity    queue bound (leaky_bucket)
//	key=x       this line's key, see below; a line without key= is one
//	            limit that every call of the method shares
//	emptykey=x, keyhash=true
//	            what is done with this line's key, see below
//
// So
//
//	//ratelimit:period=1 threshold=10 key=user
//	//ratelimit:period=1h threshold=1000
//
// admits 10 calls a second for each user and 1,000 an hour in all. (Before
// keys were per line, the first line's key= keyed both; write key= on
// every line for that.) Lines with the same key= are keyed by one value,
// computed once, and must agree on its emptykey= and keyhash=. A method
// whose lines all have the same key=, or none, is checked under that one
// key (ratelimit.Rule.Check), as before; one whose lines differ with a key
// per line (ratelimit.Rule.CheckKeys), naming each line's key in the
// rule's KeyExprs.
//
// The generator asks the runtime it is built with (the same module as the
// runtime the generated code imports) whether it can decide each limit, so
// an algorithm the runtime does not implement yet is an error at the
// directive rather than at every call.
//
// A line may also give the per-call options, which, when written on
// several lines of a method, must agree; and the key of the line:
//
//	key=x       a separate limit per value of x, a Go expression of a
//	            small subset: a parameter (key=user), its fields and
//	            methods called without arguments (key=req.User.ID,
//	            key=req.GetOrder().GetTenant()), a call of a function of
//	            the package or of a package the file imports, with such
//	            expressions as arguments (key=principal(ctx),
//	            key=auth.Principal(ctx)), or len(x) of a slice, a map, a
//	            string or an array. The value must be a string (used as
//	            is), an integer (in decimal, even if it has a String
//	            method), a pointer to one, a type parameter whose types are
//	            all strings or all signed or all unsigned integers, or a
//	            fmt.Stringer. A function has fixed parameters and no type
//	            parameters, and may return an error as its second result:
//	            a non-nil one fails the call, wrapped, uncharged, whatever
//	            onerror= says. A file imports a package that only its
//	            directives call blank (import _ "example.com/svc/auth"):
//	            the compiler does not read directives, and the generated
//	            file imports it. If a pointer or interface on the way is
//	            nil, the call returns an error wrapping ratelimit.ErrNilKey
//	            instead of panicking; a protobuf getter (a Get method of a
//	            message type with the ProtoMessage method) is called on a
//	            nil message, and returns its zero value, as in Go.
//	emptykey=x  share (the default): calls whose key is "" share one
//	            limit, like any other key; deny: such a call fails with an
//	            error wrapping ratelimit.ErrEmptyKey, uncharged.
//	keyhash=true
//	            limit each call under the SHA-256 digest of its key
//	            (ratelimit.KeyDigest), for a key that is a secret (an API
//	            key, a token): Redis key names, errors, hooks and logs
//	            then hold the digest, never the key.
//	name=n      the limit identity; methods with the same name share one
//	            limit and must declare the same limits. The default is the
//	            package path, type and method: example.com/svc.Store.Get.
//	cost=n      units a call takes: a number, or an integer computed as
//	            for key= (cost=n, cost=req.Size, cost=len(req.Skus),
//	            cost=weight(req)).
//	wait=d      how long a denied call may wait to be admitted.
//	onerror=x   allow, deny or decide locally (local) the calls the
//	            limiter cannot decide, such as while Redis is down.
//	shadow=true only report what would be denied.
//
// A type's doc comment may name its decorator, on a line of its own:
//
//	//ratelimit:decorator=LimitedStore
//
// which declares LimitedStore and NewLimitedStore instead of
// StoreWithRateLimit and NewStoreWithRateLimit.
//
// A limited method must return error as its last result. If its first
// parameter is a context.Context, the limiter gets it; otherwise, if a
// parameter has a method Context() context.Context (a stream, such as
// grpc.ServerStreamingServer[T]), the first such parameter's context;
// otherwise context.Background().
//
// Every mistake is reported as file:line:col: message, all of them sorted
// by position; when there is any, nothing is written. A package with
// directives must type-check: its type errors are reported too (generate,
// -check and -list exit 1), but for the uses of what generated files
// declare, which the generator does not load (see below). Limits in a
// type's doc comment that limit no method, because every method has
// directives of its own, are an error.
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
// redeclares the methods to limit, with their directives:
//
//	type LimitedGreeter interface {
//		pb.GreeterServer
//		//ratelimit:period=1m threshold=2 key=req.Name
//		SayHello(ctx context.Context, req *pb.HelloRequest) (*pb.HelloReply, error)
//	}
//
// NewLimitedGreeterWithRateLimit(impl, limiter) then takes any
// pb.GreeterServer and is one, for pb.RegisterGreeterServer.
//
// An exported name the generated file would declare (a decorator, a
// constructor or RateLimitRules), or a name chosen with decorator=, that
// the package declares already is an error at that declaration, so that
// no declaration elsewhere in the package can rename the generated API;
// the other, unexported names get a number instead.
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
