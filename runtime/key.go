package ratelimit

import (
	"strconv"
	"strings"
)

// storageKey returns the Redis key of limit index i, of algorithm alg, of
// a request:
//
//	<prefix>{<name>:<key>}:<i>:<algorithm tag>
//
// such as ratelimit:{svc.Store.Get:alice}:0:log. name and key are escaped
// (see escapeKeyPart), so the braces are the only ones in the key: every
// limit of one call shares the Redis Cluster hash tag {<name>:<key>}, and
// no name or key can move a key to another slot or collide with the key of
// another name or key. The algorithm's tag keeps each algorithm's state
// apart: a limit whose algorithm changes (a new release, a rolling deploy
// running old and new side by side, an override) starts afresh instead of
// meeting another algorithm's state of another Redis type.
func storageKey(prefix, name, key string, i int, alg Algorithm) string {
	tag := keyTags[alg]
	var b strings.Builder
	b.Grow(len(prefix) + len(name) + len(key) + len(tag) + 8)
	b.WriteString(prefix)
	b.WriteByte('{')
	escapeKeyPart(&b, name)
	b.WriteByte(':')
	escapeKeyPart(&b, key)
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
		if c == '%' || c == '{' || c == '}' || c == ':' || c < 0x20 || c == 0x7f {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
}
