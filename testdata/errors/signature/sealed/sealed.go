// Package sealed is a helper of the signature diagnostics test: an
// interface with an unexported method, which no other package can
// implement.
package sealed

// Sealed can only be implemented in this package.
type Sealed interface {
	Do() error
	seal()
}
