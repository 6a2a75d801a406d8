// Package syntax is a diagnostics test of ratelimitgen: the parser's
// errors are reported with the generator's, sorted by position.
package syntax

// S has malformed directives.
type S interface {
	// ratelimit:period=1 threshold=1
	A() error
	//ratelimit:period=1 threshold=1 algo=gcra
	B() error
	//ratelimit:period=1
	C() error
	//ratelimit:period=1 threshold=1 key=missing
	D() error
	//ratelimit:period=1 threshold=1 onerror=lcoal
	E() error
	// A line's every problem is reported: the period's and the key's.
	//ratelimit:period=3x threshold=5 key=nosuch2
	F(user string) error
}
