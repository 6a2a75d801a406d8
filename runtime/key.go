package ratelimit

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// maxKeyPart is the most bytes a per-call key's escaped form (see
// escapeKeyPart) may take to be kept as it is. A longer key is replaced by
// its stand-in (see boundKey), at most maxStandIn bytes.
const maxKeyPart = 64

// shownKeyPart is how many bytes of a long key's escaped form its stand-in
// shows, to tell an operator whose key it is.
const shownKeyPart = 32

// maxStandIn is the length of the longest stand-in: the bound on every
// bounded key and on the per-call key's part of every storage key.
const maxStandIn = shownKeyPart + 1 + 2*sha256.Size

// boundKey returns the bounded key of a per-call key, as the limiters keep
// and report it: key itself when its escaped form is at most maxKeyPart bytes (the
// common case, at the cost of a length check or a scan of those bytes),
// else its stand-in
//
//	<the escaped key's first bytes, at most 32>:<hex SHA-256 of the whole key>
//
// such as Bearer eyJhbGciOiJIUzI1NiIsInR5c:9f86d081…f00a08 (97 bytes at
// most). Different keys get different results: distinct long keys have
// distinct digests; a stand-in holds a ':', which no escaped key does, so
// in a storage key it never equals a kept key; and it is longer than
// maxKeyPart, which no kept key is, so it never equals one in memory
// either. Both limiters call it once per call, before anything else uses
// the key, and [Rule.Check] once more to name the key of a denied call.
func boundKey(key string) string {
	if len(key) <= maxKeyPart/3 { // short whatever it holds; inlined
		return key
	}
	return boundLongerKey(key)
}

// boundLongerKey is boundKey for keys that may escape to more than
// maxKeyPart bytes.
func boundLongerKey(key string) string {
	if escapedPrefix(key, maxKeyPart) == len(key) {
		return key
	}
	var b strings.Builder
	b.Grow(maxStandIn)
	escapeKeyPart(&b, key[:escapedPrefix(key, shownKeyPart)])
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

// storageKey returns the Redis key of limit index i, of algorithm alg, of
// a request:
//
//	<prefix>{<name>:<key>}:<i>:<algorithm tag>
//
// such as ratelimit:{svc.Store.Get:alice}:0:log. key is bounded (see
// boundKey). name and a key kept as it is are escaped (see
// escapeKeyPart); a stand-in, longer than any key kept as it is, is
// escaped text already and is written as it is, such as
// ratelimit:{svc.Store.Get:Bearer eyJhbGciOiJIUzI1NiIsInR5c:9f86d0…}:0:log.
// So the braces are the only ones in the key: every limit of one call
// shares the Redis Cluster hash tag {<name>:<key>}, and no name or key can
// move a key to another slot or collide with the key of another name or
// key. The algorithm's tag keeps each algorithm's state apart: a limit
// whose algorithm changes (a new release, a rolling deploy running old and
// new side by side, an override) starts afresh instead of meeting another
// algorithm's state of another Redis type.
func storageKey(prefix, name, key string, i int, alg Algorithm) string {
	tag := keyTags[alg]
	var b strings.Builder
	b.Grow(len(prefix) + len(name) + len(key) + len(tag) + 8)
	b.WriteString(prefix)
	b.WriteByte('{')
	escapeKeyPart(&b, name)
	b.WriteByte(':')
	if len(key) > maxKeyPart {
		b.WriteString(key) // a stand-in
	} else {
		escapeKeyPart(&b, key)
	}
	b.WriteString("}:")
	b.WriteString(strconv.Itoa(i))
	b.WriteByte(':')
	b.WriteString(tag)
	return b.String()
}

// keyTags are the algorithms' short names in Redis keys.
var keyTags = map[Algorithm]string{
	"":            "log",
	SlidingLog:    "log",
	FixedWindow:   "fw",
	SlidingWindow: "sw",
	TokenBucket:   "tb",
	LeakyBucket:   "lb",
	GCRA:          "gcra",
}

// escapeKeyPart writes s with '%', '{', '}', ':' and non-printable ASCII
// bytes percent-encoded. The encoding is injective and its output holds none
// of '{', '}' or ':'.
func escapeKeyPart(b *strings.Builder, s string) {
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

// escapedWidth is how many bytes escapeKeyPart writes for each byte: 3
// for those it percent-encodes, else 1. A table, as every call's key may
// be scanned (see boundKey).
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
