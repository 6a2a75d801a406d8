package callkey

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const megabyte = 1 << 20

// bearer returns an n-byte bearer token ending in last.
func bearer(n int, last byte) string {
	b := []byte("Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + strings.Repeat("eyJzdWIiOiIxMjM0NTY3ODkwIn0", n/27+1))[:n]
	b[n-1] = last
	return string(b)
}

func TestBoundKeyKeepsShortKeysAndDigestsLongOnes(t *testing.T) {
	for _, k := range []string{"", "user-42", strings.Repeat("a", MaxPart), strings.Repeat(":", MaxPart/3),
		"2001:0db8:85a3:0000:0000:8a2e:0370:7334", "550e8400-e29b-41d4-a716-446655440000"} {
		assert.Equal(t, k, Bound(k), "kept as it is")
	}
	for _, k := range []string{strings.Repeat("a", MaxPart+1), strings.Repeat(":", MaxPart/3+1),
		strings.Repeat("{", 100), bearer(megabyte, 'A'), strings.Repeat(":", megabyte)} {
		b := Bound(k)
		sum := sha256.Sum256([]byte(k))
		head, digest, ok := strings.Cut(b, ":")
		require.True(t, ok, "%q", b)
		assert.Equal(t, hex.EncodeToString(sum[:]), digest)
		assert.LessOrEqual(t, len(head), shownPart)
		assert.GreaterOrEqual(t, len(head), shownPart-2, "a long key fills its shown part")
		var esc strings.Builder
		Escape(&esc, k[:min(len(k), shownPart)])
		assert.True(t, strings.HasPrefix(esc.String(), head), "%q shows the start of the key", head)
		assert.Greater(t, len(b), MaxPart)
		assert.LessOrEqual(t, len(b), MaxStandIn)
	}
	assert.Equal(t, "Bearer eyJhbGciOiJIUzI1NiIsInR5c:", Bound(bearer(megabyte, 'A'))[:33])
	assert.Equal(t, strings.Repeat("%3A", 10)+":", Bound(strings.Repeat(":", megabyte))[:31])
}

func TestBoundKeyAllocatesNothingForShortKeys(t *testing.T) {
	for _, k := range []string{"user-42", "550e8400-e29b-41d4-a716-446655440000", strings.Repeat("a", MaxPart)} {
		assert.Zero(t, testing.AllocsPerRun(100, func() { _ = Bound(k) }), "%q", k)
	}
}

// BenchmarkBoundKey is what bounding adds to a call, per kind of key.
func BenchmarkBoundKey(b *testing.B) {
	for _, k := range []struct{ name, key string }{
		{"short", "user-42"}, {"uuid", "550e8400-e29b-41d4-a716-446655440000"},
		{"ipv6", "2001:db8:85a3::8a2e:370:7334"}, {"1MB", bearer(megabyte, 'A')},
	} {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Bound(k.key)
			}
		})
	}
}

func TestRedactMatchesTheStandIn(t *testing.T) {
	long := bearer(megabyte, 'A')
	sum := sha256.Sum256([]byte(long))
	want := "sha256:" + hex.EncodeToString(sum[:])[:12]
	assert.Equal(t, want, Redact(long))
	assert.Equal(t, want, Redact(Bound(long)), "a stand-in redacts as its key does")
	short := sha256.Sum256([]byte("user-42"))
	assert.Equal(t, "sha256:"+hex.EncodeToString(short[:])[:12], Redact("user-42"))
	assert.NotContains(t, Redact("user-42"), "user")
}
