// Package missing has directives but no generated code.
package missing

// Store is decorated.
type Store interface {
	// want +1 `missing generated code for Store: run go generate \(ratelimitgen\)`
	//ratelimit:period=1 threshold=1
	Get() error
}
