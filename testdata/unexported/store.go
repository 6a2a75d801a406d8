// Package unexported is a golden test of ratelimitgen: an unexported
// interface and methods get an unexported decorator and constructor.
package unexported

import "context"

type store interface {
	//ratelimit:period=2 threshold=1 key=id
	get(ctx context.Context, id int64) (string, error)
	put(ctx context.Context, id int64, v string) error
}

// HTTPClient is exported with an initialism; its rule variables start with
// httpClient.
type HTTPClient interface {
	//ratelimit:period=1 threshold=1
	Do(url string) (int, error)
}
