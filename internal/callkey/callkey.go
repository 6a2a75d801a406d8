// Package callkey bounds the per-call keys of limited calls, so that a key
// from outside (a header, a token) can neither make a limiter store more
// than a small bounded amount nor collide with another key, and escapes
// them for Redis storage keys.
package callkey

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// MaxPart is the most bytes a per-call key's escaped form (see
// Escape) may take to be kept as it is. A longer key is replaced by
// its stand-in (see Bound), at most MaxStandIn bytes.
const MaxPart = 64

// shownPart is how many bytes of a long key's escaped form its stand-in
// shows, to tell an operator whose key it is.
const shownPart = 32

// MaxStandIn is the length of the longest stand-in: the bound on every
// bounded key and on the per-call key's part of every storage key.
const MaxStandIn = shownPart + 1 + 2*sha256.Size

// Bound returns the bounded key of a per-call key, as the limiters keep
// and report it: key itself when its escaped form is at most MaxPart bytes (the
// common case, at the cost of a length check or a scan of those bytes),
// else its stand-in
//
//	<the escaped key's first bytes, at most 32>:<hex SHA-256 of the whole key>
//
// such as Bearer eyJhbGciOiJIUzI1NiIsInR5c:9f86d081…f00a08 (97 bytes at
// most). Different keys get different results: distinct long keys have
// distinct digests; a stand-in holds a ':', which no escaped key does, so
// in a storage key it never equals a kept key; and it is longer than
// MaxPart, which no kept key is, so it never equals one in memory
// either. Both limiters call it once per call, before anything else uses
// the key, and Rule.Check once more to name the key of a denied call.
func Bound(key string) string {
	if len(key) <= MaxPart/3 { // short whatever it holds; inlined
		return key
	}
	return boundLonger(key)
}

// boundLonger is Bound for keys that may escape to more than
// MaxPart bytes.
func boundLonger(key string) string {
	if escapedPrefix(key, MaxPart) == len(key) {
		return key
	}
	var b strings.Builder
	b.Grow(MaxStandIn)
	Escape(&b, key[:escapedPrefix(key, shownPart)])
	b.WriteByte(':')
	sum := digest(key)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	b.Write(h[:])
	return b.String()
}

// digest returns the SHA-256 of s, copying it in small chunks instead of
// converting it whole, which would allocate a copy as long as s.
func digest(s string) [sha256.Size]byte {
	h := sha256.New()
	var buf [512]byte
	for len(s) > 0 {
		n := copy(buf[:], s)
		h.Write(buf[:n])
		s = s[n:]
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// Escape writes s with '%', '{', '}', ':' and non-printable ASCII
// bytes percent-encoded. The encoding is injective and its output holds none
// of '{', '}' or ':'.
func Escape(b *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if escapedWidth[c] > 1 {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
}

// escapedWidth is how many bytes Escape writes for each byte: 3
// for those it percent-encodes, else 1. A table, as every call's key may
// be scanned (see Bound).
var escapedWidth = func() (w [256]uint8) {
	for c := range w {
		w[c] = 1
		if c == '%' || c == '{' || c == '}' || c == ':' || c < 0x20 || c == 0x7f {
			w[c] = 3
		}
	}
	return w
}()

// escapedPrefix returns how many leading bytes of s escape to at most max
// bytes, never splitting an escape.
func escapedPrefix(s string, max int) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if n += int(escapedWidth[s[i]]); n > max {
			return i
		}
	}
	return len(s)
}

// Named returns the bounded key of the key an operator names: key itself
// when it has the form of a stand-in, which only the bounded key of a long
// key has, else Bound(key). So an operator who sees a stand-in in an error,
// a log or Redis can address the key with it. No call's bounded key is
// another key's, so no key's value can address the state of another.
func Named(key string) string {
	if IsStandIn(key) {
		return key
	}
	return Bound(key)
}

// IsStandIn reports whether s has the form of a stand-in (see Bound): at
// most 32 bytes of escaped text, ':' and 64 lowercase hex digits.
func IsStandIn(s string) bool {
	n := len(s) - 1 - 2*sha256.Size
	if n < 0 || n > shownPart || s[n] != ':' {
		return false
	}
	for i := range n {
		if s[i] != '%' && escapedWidth[s[i]] > 1 {
			return false
		}
	}
	for i := n + 1; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Join returns one string that tells the keys of a call with a key per
// limit apart from those of any other such call: each key's length, ':'
// and the key, in order. The calls whose keys join to one string wait in
// one queue.
func Join(keys []string) string {
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(strconv.Itoa(len(k)))
		b.WriteByte(':')
		b.WriteString(k)
	}
	return b.String()
}

// Redact returns what logs show of a per-call key unless told to show it:
// "sha256:" and the first 12 hex digits of the key's SHA-256, which a
// long key's stand-in (and so key itself, when it is a stand-in) also
// starts its digest with, so an operator can match a log line with an
// error or a Redis key without the log holding the key.
func Redact(key string) string {
	if IsStandIn(key) {
		return "sha256:" + key[len(key)-2*sha256.Size:][:12]
	}
	sum := digest(key)
	return "sha256:" + hex.EncodeToString(sum[:6])
}
