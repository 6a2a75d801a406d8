package ratelimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseDecisionReadsEveryReplyForm decodes each form a decide script
// answers with, and rejects replies no script sends.
func TestParseDecisionReadsEveryReplyForm(t *testing.T) {
	us := time.Microsecond
	valid := []struct {
		name  string
		reply any
		want  Decision
	}{
		{"packed", int64((7<<20+1500)*64 + 20), Decision{Allowed: true, Remaining: 7, ResetAfter: 1500 * us}},
		{"admitted", []any{int64(7), int64(1500), int64(300)}, Decision{Allowed: true, Remaining: 7, ResetAfter: 1500 * us, Delay: 300 * us}},
		{"full", []any{int64(0), int64(2), int64(40), int64(1500), int64(1), int64(0)},
			Decision{Remaining: 2, RetryAfter: 40 * us, ResetAfter: 1500 * us, Limit: 1}},
	}
	for _, c := range valid {
		d, err := parseDecision(c.reply)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, d, c.name)
	}
	for _, bad := range []any{int64(-1), "OK", []any{int64(1)}, []any{int64(1), "x", int64(3)}, []any{1, 2, 3, 4, 5}} {
		_, err := parseDecision(bad)
		var re *replyError
		assert.ErrorAs(t, err, &re, "%#v", bad)
	}
}
