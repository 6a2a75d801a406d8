package redislimit

import (
	"strconv"
	"strings"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	"github.com/ratelimitgen/ratelimitgen/internal/limitfacts"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// storageKey returns the Redis key of limit index i, of algorithm alg, of
// a request:
//
//	<prefix>{<name>:<key>}:<i>:<algorithm tag>
//
// such as ratelimit:{svc.Store.Get:alice}:0:log. key is bounded (see
// callkey.Bound). name and a key kept as it is are escaped (see
// callkey.Escape); a stand-in, longer than any key kept as it is, is
// escaped text already and is written as it is, such as
// ratelimit:{svc.Store.Get:Bearer eyJhbGciOiJIUzI1NiIsInR5c:9f86d0…}:0:log.
// So the braces are the only ones in the key: every limit of one call
// shares the Redis Cluster hash tag {<name>:<key>}, and no name or key can
// move a key to another slot or collide with the key of another name or
// key. The algorithm's tag keeps each algorithm's state apart: a limit
// whose algorithm changes (a new release, a rolling deploy running old and
// new side by side, an override) starts afresh instead of meeting another
// algorithm's state of another Redis type.
func storageKey(prefix, name, key string, i int, alg ratelimit.Algorithm) string {
	tag := keyTags[alg]
	var b strings.Builder
	b.Grow(len(prefix) + len(name) + len(key) + len(tag) + 8)
	b.WriteString(prefix)
	b.WriteByte('{')
	callkey.Escape(&b, name)
	b.WriteByte(':')
	if len(key) > callkey.MaxPart {
		b.WriteString(key) // a stand-in
	} else {
		callkey.Escape(&b, key)
	}
	b.WriteString("}:")
	b.WriteString(strconv.Itoa(i))
	b.WriteByte(':')
	b.WriteString(tag)
	return b.String()
}

// keyTags are the algorithms' short names in Redis keys (their KeyTag in
// package limitfacts), the empty algorithm's being the default's.
var keyTags = func() map[ratelimit.Algorithm]string {
	tags := map[ratelimit.Algorithm]string{}
	for _, a := range limitfacts.Algorithms() {
		tags[ratelimit.Algorithm(a.Name)] = a.KeyTag
	}
	tags[""] = tags[limitfacts.Default]
	return tags
}()

// factsOf returns the facts of l's algorithm, which l names validly or
// leaves to the default.
func factsOf(l ratelimit.Limit) limitfacts.Algorithm {
	a, _ := limitfacts.Lookup(string(l.AlgorithmOrDefault()))
	return a
}
