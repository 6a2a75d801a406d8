// Package migrated has code generated before each directive line had its
// own key=: its second line was then keyed by user too, and now limits
// every call together. The diagnostic says so, and how to keep the old
// meaning.
package migrated

import "context"

// Feed is decorated.
type Feed interface {
	// want +1 `ratelimit_gen.go is stale: its code for Feed.Post differs from this directive; each line has its own key= now: the line at migrated.go:13:2 has none and limits every call together \(it limited each user before: write key=user on it to keep that\); run go generate \(ratelimitgen\)`
	//ratelimit:period=1 threshold=10 key=user
	//ratelimit:period=1h threshold=1000
	Post(ctx context.Context, user, text string) error
}
