// Package calendar is a diagnostics test of ratelimitgen: calendar
// periods and their zones.
package calendar

// C has calendar periods gone wrong.
type C interface {
	//ratelimit:period=month threshold=10 tz=Europe/Pariss
	A() error
	//ratelimit:period=month threshold=10 algorithm=token_bucket
	B() error
	//ratelimit:period=1h threshold=10 tz=Europe/Paris
	C() error
	//ratelimit:period=monthly threshold=10
	D() error
	//ratelimit:period=day threshold=10 tz=Local
	E() error
}
