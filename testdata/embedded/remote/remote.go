// Package remote is a helper of the embedded golden test: interfaces from
// another package, one of them generic.
package remote

import "context"

// Page is a result type from another package.
type Page struct {
	Body []byte
}

// Fetcher fetches pages.
type Fetcher interface {
	Fetch(ctx context.Context, url string) (Page, error)
}

// Getter is generic.
type Getter[T any] interface {
	Get(ctx context.Context, id string) (T, error)
}
