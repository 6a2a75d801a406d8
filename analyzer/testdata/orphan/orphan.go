// Package orphan has a generated file but no directives left.
package orphan

// Store is no longer decorated.
type Store interface {
	Get() error
}
