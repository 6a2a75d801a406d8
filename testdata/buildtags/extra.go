//go:build ratelimitextra

package buildtags

// Extra is only loaded with -tags ratelimitextra, so by default it is
// neither seen nor decorated.
type Extra interface {
	//ratelimit:period=1 threshold=1
	Do() error
}
