// Package shared is a golden test of ratelimitgen: shared lines (issue
// 29). A type declares a line once, and each of its limited methods is
// decided against its own lines and the shared ones together, all or
// nothing; a method of another type takes a shared line with shared=
// alone. A shared line's state belongs to its name, not to a method.
package shared

import "context"

// API is a SaaS API: each call spends its method's own line (per API key,
// known by its digest), the global line of the whole service and its
// tenant's monthly quota.
//
//ratelimit:shared=global period=1 threshold=20
//ratelimit:shared=tenant-quota period=month threshold=50 key=tenant
type API interface {
	// Search takes 5 calls a second per API key.
	//ratelimit:period=1 threshold=5 key=apiKey keyhash=true
	Search(ctx context.Context, tenant, apiKey, q string) ([]string, error)

	// Export costs 3 units of every line, its own of 2 calls (6 units) a
	// second per API key included.
	//ratelimit:period=1 threshold=6 key=apiKey keyhash=true cost=3
	Export(ctx context.Context, tenant, apiKey string) error

	// Health is not limited: it has no line of its own, so it takes no
	// shared line either.
	Health(ctx context.Context) error
}

// Billing takes the API's global line, and nothing else.
type Billing interface {
	//ratelimit:shared=global
	Charge(ctx context.Context, tenant string, cents int64) error
}

// Auth counts failed logins on two lines: 3 per 15 minutes per user, and
// 5 an hour across users on its shared line logins.
//
//ratelimit:shared=logins period=1h threshold=5
type Auth interface {
	// Login counts only its failures, on both lines: a success spends
	// nothing, and logins in flight never deny each other.
	//ratelimit:period=15m threshold=3 key=user refund=success
	Login(ctx context.Context, user, password string) error

	// Rotate takes 2 an hour per user and the logins line; a rotation that
	// fails is given back on both.
	//ratelimit:period=1h threshold=2 key=user refund=error
	Rotate(ctx context.Context, user string) error
}
