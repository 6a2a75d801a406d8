// Package settle is a golden test of ratelimitgen: settle= reads the final
// cost of a call from its results, after reserving its cost= before it.
package settle

import (
	"context"
	"errors"
)

// Usage is what a completion took.
type Usage struct{ TotalTokens int }

// Completion is a model's answer.
type Completion struct {
	Text  string
	Usage *Usage
}

// Request asks for a completion of at most MaxTokens tokens.
type Request struct {
	APIKey    string
	MaxTokens int64
}

// Model completes prompts.
type Model interface {
	// Complete reserves the request's MaxTokens per API key, and settles at
	// the tokens the completion used.
	//ratelimit:period=1m threshold=1000 key=req.APIKey cost=req.MaxTokens settle=resp.Usage.TotalTokens
	Complete(ctx context.Context, req *Request) (resp *Completion, err error)
	// Embed reserves one unit and settles at the number of vectors.
	//ratelimit:period=1 threshold=100 algorithm=token_bucket settle=len(vectors)
	Embed(ctx context.Context, texts []string) (vectors [][]float32, err error)
	// Chat makes at most 3 requests a minute per API key, and reserves
	// the request's MaxTokens of 1000 tokens a minute, settled at the
	// tokens used: the request line costs 1 per call, the token line the
	// call's cost, in one decision.
	//ratelimit:period=1m threshold=3 key=req.APIKey
	//ratelimit:period=1m threshold=1000 key=req.APIKey cost=req.MaxTokens settle=resp.Usage.TotalTokens
	Chat(ctx context.Context, req *Request) (resp *Completion, err error)
	// Login counts failed logins only: 3 per 15 minutes per user.
	//ratelimit:period=15m threshold=3 key=user refund=success
	Login(ctx context.Context, user, password string) error
	// Probe settles at nothing when it succeeds: 2 failures a minute.
	//ratelimit:period=1m threshold=2 key=user settle=0
	Probe(ctx context.Context, user string) error
	// Ask gives back the requests and tokens of a call the provider
	// refused with a retryable error.
	//ratelimit:period=1m threshold=3 key=req.APIKey refund=retryable(err)
	//ratelimit:period=1m threshold=1000 key=req.APIKey cost=req.MaxTokens refund=retryable(err)
	Ask(ctx context.Context, req *Request) (*Completion, error)
	// Count settles at a function of its results.
	//ratelimit:period=1 threshold=100 cost=10 settle=billed(n,err)
	Count(ctx context.Context) (n int64, err error)
}

// billed is what a count of n costs.
func billed(n int64, err error) int64 {
	if err != nil {
		return 0
	}
	return n / 2
}

// errBusy is a provider's retryable refusal.
var errBusy = errors.New("provider busy")

// retryable reports whether err is worth retrying: its call is given back.
func retryable(err error) bool { return errors.Is(err, errBusy) }
