package ratelimit

import (
	"crypto/sha256"
	"encoding/hex"
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
