// Package cooldown is a golden test of ratelimitgen: cooldown=true lets
// an upstream's retry time, carried by a method's error, cool a line.
package cooldown

import (
	"context"
	"time"
)

// Request asks a provider for a completion.
type Request struct {
	Tenant string
	Max    int64
}

// Answer is a provider's answer.
type Answer struct {
	Used int64
}

// BusyError is a provider's 429, with its Retry-After.
type BusyError struct{ After time.Duration }

func (e *BusyError) Error() string { return "provider busy" }

// RetryAfter is how long the provider asked to wait.
func (e *BusyError) RetryAfter() time.Duration { return e.After }

// Provider is an upstream with an org-wide limit.
type Provider interface {
	// Ping is limited org-wide; a 429 pauses every caller.
	//ratelimit:period=1m threshold=100 cooldown=true
	Ping(ctx context.Context) error
	// Ask is limited per tenant and org-wide; a 429 pauses the org-wide
	// line, for every tenant.
	//ratelimit:period=1m threshold=5 key=req.Tenant
	//ratelimit:period=1m threshold=100 cooldown=true
	Ask(ctx context.Context, req *Request) (*Answer, error)
	// Complete reserves the request's Max tokens of its tenant's, settles
	// at what it used, and holds one of 2 slots; a 429 pauses the
	// tenant's token line.
	//ratelimit:period=1m threshold=1000 key=req.Tenant cost=req.Max settle=resp.Used cooldown=true
	//ratelimit:concurrency=2 key=req.Tenant
	Complete(ctx context.Context, req *Request) (resp *Answer, err error)
}
