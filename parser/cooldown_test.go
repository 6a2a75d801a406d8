package parser

import (
	"go/token"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCooldownLines(t *testing.T) {
	pos := token.Position{Filename: "x.go", Line: 5, Column: 2}
	d, errs := ParseComment(pos, "//ratelimit:period=1m threshold=60 cooldown=true")
	require.Empty(t, errs)
	assert.True(t, d.Cooldown)
	assert.Equal(t, "//ratelimit:period=60 threshold=60 cooldown=true", d.String())
	d, errs = ParseComment(pos, "//ratelimit:period=1m threshold=60 cooldown=false")
	require.Empty(t, errs)
	assert.False(t, d.Cooldown)

	for line, want := range map[string][]string{
		"//ratelimit:period=1 threshold=2 cooldown=yes": {`x.go:5:44: cooldown "yes": want true or false`},
		"//ratelimit:period=1 threshold=2 cooldwn=true": {`x.go:5:35: unknown name "cooldwn"; did you mean cooldown?`},
		"//ratelimit:concurrency=2 cooldown=true":       {"x.go:5:28: cooldown does not go with concurrency=: a slot is held while a call runs, so no upstream's retry time can cool it; put cooldown=true on one of the method's rate lines"},
	} {
		_, errs := ParseComment(pos, line)
		var got []string
		for _, e := range errs {
			got = append(got, e.Error())
		}
		assert.Equal(t, want, got, line)
	}
	// cooldown=false on a concurrency line says nothing to cool: accepted.
	_, errs = ParseComment(pos, "//ratelimit:concurrency=2 cooldown=false")
	assert.Empty(t, errs)
}
