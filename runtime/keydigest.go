package ratelimit

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
)

// KeyDigest returns the key that stands for a secret one, such as an API
// key or a bearer token, under the directive option keyhash=true: the
// lowercase hex SHA-256 of key, which `printf %s "$key" | sha256sum`
// prints. A decorator passes it to the limiter instead of key, so Redis
// key names, LimitError.Key, hooks, logs, overrides and the admin view
// show the digest and never the secret. At 64 bytes it is kept whole as
// a per-call key (see [Request.Key]).
func KeyDigest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// RedactedKey returns what logs, the deny counts and the admin view show
// of key, the key of limit i of r (i < 0: of the one key): "sha256:" and
// the first 12 hex digits of the SHA-256 of the key as the caller gave
// it, which `printf %s "$key" | sha256sum | cut -c1-12` prints. For a
// limit whose rule says its key is a digest already (Rule.KeyHash, the
// directive's keyhash=true), that is the digest's own first 12 digits,
// not a digest of the digest, so one recipe finds every key.
func (r *Request) RedactedKey(key string, i int) string {
	return RedactKey(key, r.KeyHashed(i))
}

// KeyHashed reports whether the key of limit i of r (i < 0: the one key
// of every limit) is a digest of the caller's key ([Rule.KeyHash]).
func (r *Request) KeyHashed(i int) bool {
	return r != nil && r.Rule != nil && hashed(r.Rule.KeyHash, i)
}

// RedactKey returns the redacted form of key (see [Request.RedactedKey]):
// digest says key is a [KeyDigest] of the caller's key, whose own first
// 12 hex digits are then the redacted form.
func RedactKey(key string, digest bool) string {
	if digest && isDigest(key) {
		return "sha256:" + key[:12]
	}
	return callkey.Redact(key)
}

// hashed reports whether limit i's key is a digest, as kh says; i < 0
// asks whether every limit's is (one key for all).
func hashed(kh []bool, i int) bool {
	if i >= 0 {
		return i < len(kh) && kh[i]
	}
	for _, h := range kh {
		if !h {
			return false
		}
	}
	return len(kh) > 0
}

// isDigest reports whether key is a KeyDigest: 64 lowercase hex digits.
func isDigest(key string) bool {
	if len(key) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
