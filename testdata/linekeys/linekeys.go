// Package linekeys is a golden test of ratelimitgen: each directive line
// has its own key=, and a line without one is one limit for every call
// of the method (issue 21). Lines that all share their key generate the
// code of one key, as before keys were per line.
package linekeys

import (
	"context"
	"errors"
)

// Req is a request.
type Req struct {
	User string
	Org  *Org
}

// Org is an organisation.
type Org struct{ ID string }

// Item is stored by its owner.
type Item struct {
	ID    string
	Owner int64
}

// callerKey holds the caller's principal in a context.
type callerKey struct{}

// errNoCaller is principal's error for a context without a caller.
var errNoCaller = errors.New("no caller")

// principal returns the caller's principal.
func principal(ctx context.Context) (string, error) {
	if p, ok := ctx.Value(callerKey{}).(string); ok {
		return p, nil
	}
	return "", errNoCaller
}

// region returns the region a request is served in.
func region(ctx context.Context) string {
	r, _ := ctx.Value(regionKey{}).(string)
	return r
}

// regionKey holds the region in a context.
type regionKey struct{}

// Feed is limited per line.
type Feed interface {
	// The example of docs/keys-and-costs.md: 10 per second for each
	// user, and 1,000 per hour for the whole service.
	//ratelimit:period=1 threshold=10 key=user
	//ratelimit:period=1h threshold=1000
	Post(ctx context.Context, user, text string) error

	// Per user, per organisation and in total. A nil req or org fails
	// the call with ratelimit.ErrNilKey; an empty user with
	// ratelimit.ErrEmptyKey, while an empty organisation is one more key.
	//ratelimit:period=1m threshold=5 key=req.User emptykey=deny
	//ratelimit:period=1m threshold=50 key=req.Org.ID
	//ratelimit:period=1m threshold=500
	Create(ctx context.Context, req *Req) error

	// A secret on two lines, hashed once, and a caller from a function
	// that can fail.
	//ratelimit:period=1 threshold=2 key=apiKey keyhash=true emptykey=deny
	//ratelimit:period=1h threshold=100 key=apiKey keyhash=true emptykey=deny
	//ratelimit:period=1h threshold=1000 key=principal(ctx)
	Search(ctx context.Context, apiKey, query string) ([]string, error)

	// An integer key on two lines, formatted once, and every call; the
	// wait is the call's, on every line, and the cost is each line's that
	// writes it (a line without cost= counts 1 per call).
	//ratelimit:period=1 threshold=6 key=item.Owner cost=2 wait=10ms
	//ratelimit:period=1m threshold=60 key=item.Owner cost=2
	//ratelimit:period=1m threshold=100
	Put(item Item) error

	// A function's result on two lines is computed once.
	//ratelimit:period=1 threshold=5 key=region(ctx)
	//ratelimit:period=1m threshold=50 key=region(ctx)
	//ratelimit:period=1h threshold=500 key=user
	Like(ctx context.Context, user string) error

	// Every line keyed the same: the code of one key.
	//ratelimit:period=1 threshold=10 key=user
	//ratelimit:period=1h threshold=1000 key=user
	Follow(ctx context.Context, user string) error

	// No line keyed: the code of no key.
	//ratelimit:period=1 threshold=100
	//ratelimit:period=1h threshold=10000
	Stats(ctx context.Context) (int, error)
}

// Admin's methods each allow 2 calls a minute for each caller and 3 in
// all: a type's lines have their own keys too.
//
//ratelimit:period=1m threshold=2 key=caller
//ratelimit:period=1m threshold=3
type Admin interface {
	Ban(ctx context.Context, caller, who string) error
	Unban(ctx context.Context, caller, who string) error
}
