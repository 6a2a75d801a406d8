package parser

import (
	"go/token"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConcurrencyLines(t *testing.T) {
	pos := token.Position{Filename: "x.go", Line: 5, Column: 2}
	d, errs := ParseComment(pos, "//ratelimit:concurrency=10 key=tenant lease=1m wait=2s")
	require.Empty(t, errs)
	assert.Equal(t, int64(10), d.Concurrency)
	assert.Equal(t, time.Minute, d.Lease)
	assert.Equal(t, "//ratelimit:concurrency=10 lease=60 key=tenant wait=2", d.String())

	for line, want := range map[string][]string{
		"//ratelimit:concurrency=0":                 {`x.go:5:26: concurrency "0": must be positive`},
		"//ratelimit:concurrency=2 lease=10us":      {`x.go:5:34: lease "10us": must be at least 1ms`},
		"//ratelimit:period=1 threshold=2 lease=1s": {"x.go:5:35: lease needs concurrency=: it is how long a slot of a concurrency limit stays taken"},
		"//ratelimit:concurrency=2 period=1":        {"x.go:5:28: period= does not go with concurrency=: a concurrency line limits the calls in flight, not the calls per period (write the rate limit on a line of its own)"},
		"//ratelimit:concurrency=2 algorithm=gcra":  {"x.go:5:28: algorithm= does not go with concurrency=: a concurrency line limits the calls in flight, not the calls per period (write the rate limit on a line of its own)"},
		"//ratelimit:concurrency=x":                 {`x.go:5:26: concurrency "x": want a positive whole number`},
	} {
		_, errs := ParseComment(pos, line)
		var got []string
		for _, e := range errs {
			got = append(got, e.Error())
		}
		assert.Equal(t, want, got, line)
	}
}
