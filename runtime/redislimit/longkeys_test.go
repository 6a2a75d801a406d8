package redislimit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/callkey"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// longName is a generated decorator's limit name, as long as they come:
// the Redis key bound (200 bytes) must hold with it.
const longName = "github.com/ratelimitgen/ratelimitgen/examples/httpservice.Store.Get"

// shownPart is how much of a long key its stand-in shows (see callkey.Bound).
const shownPart = 32

// Bounds the issue sets for the Redis key of a 1 MB per-call key.
const (
	maxRedisKey   = 200 // bytes
	maxKeyMemory  = 400 // MEMORY USAGE, bytes
	megabyte      = 1 << 20
	bearerPrefix  = "Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
	colonsDescr   = "1MB_of_colons"
	headerDescr   = "1MB_header"
	lastByteDescr = "1MB_header_last_byte"
)

// longValues returns 1 MB per-call keys: a bearer token as a header would
// carry it, and colons, which percent-encoding triples.
func longValues() map[string]string {
	return map[string]string{
		headerDescr: bearer(megabyte, 'A'),
		colonsDescr: strings.Repeat(":", megabyte),
	}
}

// bearer returns an n-byte bearer token ending in last.
func bearer(n int, last byte) string {
	b := []byte(bearerPrefix + strings.Repeat("eyJzdWIiOiIxMjM0NTY3ODkwIn0", n/27+1))[:n]
	b[n-1] = last
	return string(b)
}

// lookalikes returns per-call keys that render long's digest as a short
// value could: the digest in hex (both cases), base64 and raw, with and
// without the stand-in's shown part or a "sha256:" label, the stand-in
// itself, its Redis key and hash tag, and the shown part alone.
func lookalikes(name, long string) []string {
	sum := sha256.Sum256([]byte(long))
	hx := hex.EncodeToString(sum[:])
	standIn := callkey.Bound(long)
	head, _, _ := strings.Cut(standIn, ":")
	redisKey := storageKey(DefaultPrefix, name, standIn, 0, ratelimit.SlidingLog)
	return []string{
		hx, strings.ToUpper(hx), string(sum[:]),
		base64.StdEncoding.EncodeToString(sum[:]), base64.RawURLEncoding.EncodeToString(sum[:]),
		"sha256:" + hx, "sha256=" + hx, head + "%3A" + hx, long[:shownPart] + ":" + hx,
		head, long[:shownPart], standIn, redisKey, hashTag(redisKey), redisKey[strings.IndexByte(redisKey, ':')+1:],
	}
}

// sharesNoState calls l twice with each key under a limit of one call:
// each key's first call is admitted only if no earlier key shared its
// state, and its second denied only if the first was counted.
func sharesNoState(t *testing.T, l ratelimit.Limiter, name string, keys []string) {
	t.Helper()
	for _, alg := range ratelimit.Algorithms() {
		lim := []ratelimit.Limit{{Algorithm: alg, Period: time.Hour, Threshold: 1}}
		for i, k := range keys {
			req := ratelimit.Request{Name: name + "/" + string(alg), Key: k, Limits: lim}
			assert.True(t, allow(t, l, req).Allowed, "%s: key %d (%.80q) shares the state of an earlier one", alg, i, k)
			assert.False(t, allow(t, l, req).Allowed, "%s: key %d (%.80q) was not counted", alg, i, k)
		}
	}
}

// distinctKeys returns long per-call keys, keys equal to renderings of
// their digests, and long keys differing only in their last byte, each
// once.
func distinctKeys() []string {
	keys := []string{"", "user-42", strings.Repeat("a", callkey.MaxPart), strings.Repeat("a", callkey.MaxPart+1)}
	for _, long := range longValues() {
		keys = append(keys, long, long[:len(long)-1]+"B", long[:len(long)-1], callkey.Bound(long)+"x")
		keys = append(keys, lookalikes(longName, long)...)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

func TestLongKeysShareNoState(t *testing.T) {
	keys := distinctKeys()
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		sharesNoState(t, newLimiter(ratelimit.WithClock(newManualClock())), longName, keys)
	})
}

// TestBackendsAgreeOnLongKeys is TestBackendsAgree's random sequence of
// calls over long keys and keys that look like their stand-ins.
func TestBackendsAgreeOnLongKeys(t *testing.T) {
	keys := distinctKeys()
	for _, set := range agreeSets()[:8] {
		t.Run(set.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(len(set.name))))
			clock := newManualClock()
			mem := ratelimit.NewMemory(ratelimit.WithClock(clock))
			red := newTestRedis(t, ratelimit.WithClock(clock))
			gen := newTest(rdb(t), ratelimit.WithClock(clock), WithPrefix("generic:"), withGenericScript(), WithDenyCache(0))
			for i := range 300 {
				req := set.request(rng, set.step(rng, clock, i, 300))
				req.Key = keys[rng.IntN(len(keys))]
				dm := allow(t, mem, req)
				require.Equal(t, dm, allow(t, red, req), "call %d, key %.80q", i, req.Key)
				require.Equal(t, dm, allow(t, gen, req), "generic script, call %d, key %.80q", i, req.Key)
			}
		})
	}
}

// boundedRedisKeys decides a call of two limits (alg and a sliding log)
// for each long value and checks its Redis keys through keys, which lists
// them: each at most maxRedisKey bytes and maxKeyMemory of MEMORY USAGE,
// with the value's stand-in as the only braced hash tag and, if slot is
// not nil, all in one slot.
func boundedRedisKeys(t *testing.T, l *Limiter, c redis.UniversalClient, flush func(), keys func() []string, slot func(string) int64) {
	ctx := context.Background()
	for descr, v := range longValues() {
		for _, alg := range ratelimit.Algorithms() {
			flush()
			lim := []ratelimit.Limit{{Algorithm: alg, Period: time.Hour, Threshold: 5}, {Period: time.Minute, Threshold: 3}}
			require.True(t, allow(t, l, ratelimit.Request{Name: longName, Key: v, Limits: lim}).Allowed)
			got := keys()
			require.ElementsMatch(t, []string{l.Key(longName, v, 0, alg), l.Key(longName, v, 1, ratelimit.SlidingLog)}, got)
			for _, k := range got {
				mem, err := c.MemoryUsage(ctx, k, 0).Result()
				require.NoError(t, err)
				t.Logf("%s %s: %d-byte key %s, MEMORY USAGE %d", descr, alg, len(k), k, mem)
				assert.LessOrEqual(t, len(k), maxRedisKey, k)
				assert.LessOrEqual(t, mem, int64(maxKeyMemory), k)
				assert.Equal(t, 1, strings.Count(k, "{"), k)
				assert.Equal(t, 1, strings.Count(k, "}"), k)
				assert.Equal(t, longName+":"+callkey.Bound(v), hashTag(k))
				if slot != nil {
					assert.Equal(t, slot(got[0]), slot(k), "slot of %s", k)
				}
			}
		}
	}
}

func TestLongKeysAreBoundedInRedis(t *testing.T) {
	l := newTestRedis(t, ratelimit.WithClock(newManualClock()))
	c := rdb(t)
	keys := func() []string { return c.Keys(context.Background(), "*").Val() }
	// A standalone server has no CLUSTER KEYSLOT: the hash tag is checked.
	boundedRedisKeys(t, l, c, func() { srv.Flush(t) }, keys, nil)
}

// longKeys is TestLongKeysAreBoundedInRedis and TestLongKeysShareNoState
// on the cluster: every key of a call in one slot (CLUSTER KEYSLOT), on
// one master.
func (ct *clusterTest) longKeys(t *testing.T) {
	l, c := ct.limiter(t, ratelimit.WithClock(newManualClock()))
	keys := func() []string {
		var all []string
		holders := 0
		for _, ks := range keysByMaster(t, c) {
			all = append(all, ks...)
			if len(ks) > 0 {
				holders++
			}
		}
		assert.Equal(t, 1, holders, "keys of one call on several masters")
		return all
	}
	boundedRedisKeys(t, l, c, func() { ct.cluster.Flush(t) }, keys, func(k string) int64 { return keySlot(t, c, k) })
	ct.cluster.Flush(t)
	sharesNoState(t, l, longName, distinctKeys())
}

// TestLongKeysAreNamedBoundedly checks what an operator sees of a denied
// call with a 1 MB key: the LimitError's key and message, and the
// SlogHook's records, are short; the records show the digest the key's
// stand-in ends with, or with WithRawKeys the stand-in.
func TestLongKeysAreNamedBoundedly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, newLimiter func(...ratelimit.Option) ratelimit.Limiter) {
		var log, raw bytes.Buffer
		l := newLimiter(ratelimit.WithClock(newManualClock()), ratelimit.WithHook(
			ratelimit.NewSlogHook(slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))),
			ratelimit.NewSlogHook(slog.New(slog.NewTextHandler(&raw, &slog.HandlerOptions{Level: slog.LevelDebug}))).WithRawKeys()))
		rule := &ratelimit.Rule{Name: longName, Limits: []ratelimit.Limit{{Period: time.Hour, Threshold: 1}}}
		for descr, v := range longValues() {
			require.NoError(t, rule.Check(context.Background(), l, 1, v), descr)
			err := rule.Check(context.Background(), l, 1, v)
			var le *ratelimit.LimitError
			require.True(t, errors.As(err, &le), "%s: %v", descr, err)
			assert.Equal(t, callkey.Bound(v), le.Key)
			var head strings.Builder
			callkey.Escape(&head, v[:10])
			assert.True(t, strings.HasPrefix(le.Key, head.String()), "%q shows whose key it is", le.Key)
			assert.LessOrEqual(t, len(le.Key), callkey.MaxStandIn)
			assert.LessOrEqual(t, len(err.Error()), 300, err.Error())
			assert.Contains(t, err.Error(), le.Key)
			// The Redis key holds the same stand-in.
			assert.Contains(t, storageKey(DefaultPrefix, longName, le.Key, 0, ratelimit.SlidingLog), le.Key)
		}
		for _, buf := range []*bytes.Buffer{&log, &raw} {
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			require.Len(t, lines, 4)
			for _, line := range lines {
				assert.LessOrEqual(t, len(line), 500, line)
			}
		}
		for _, v := range longValues() {
			standIn := callkey.Bound(v)
			assert.Contains(t, log.String(), " key=sha256:"+standIn[len(standIn)-64:][:12]+" ")
			assert.NotContains(t, log.String(), standIn[:20])
			assert.Contains(t, raw.String(), standIn)
		}
	})
}

// TestTheFallbackBoundsLongKeys: while Redis is down, a FailLocal rule's
// fallback keeps long keys apart and names them by their stand-ins too.
func TestTheFallbackBoundsLongKeys(t *testing.T) {
	var log bytes.Buffer
	l := downLimiter(t, stoppedAddr(t), ratelimit.WithClock(newManualClock()), ratelimit.WithHook(ratelimit.NewSlogHook(newTextLogger(&log, slog.LevelDebug))))
	ctx := context.Background()
	for _, alg := range ratelimit.Algorithms() {
		rule := &ratelimit.Rule{Name: longName + "/" + string(alg), Limits: []ratelimit.Limit{{Algorithm: alg, Period: time.Hour, Threshold: 1}}, OnError: ratelimit.FailLocal}
		for i, k := range distinctKeys() {
			log.Reset()
			require.NoError(t, rule.Check(ctx, l, 1, k), "%s: key %d (%.80q) shares the state of an earlier one", alg, i, k)
			var le *ratelimit.LimitError
			require.ErrorAs(t, rule.Check(ctx, l, 1, k), &le, "%s: key %d (%.80q) was not counted", alg, i, k)
			assert.Equal(t, callkey.Bound(k), le.Key)
			fallback := 0
			for _, line := range logLines(&log) { // and a backend failure a second
				assert.LessOrEqual(t, len(line), 500, line)
				if strings.Contains(line, "source=fallback") {
					fallback++
				}
			}
			assert.Equal(t, 2, fallback, "an admission and a denial by the fallback")
		}
	}
}

// FuzzStorageKey checks the key encoding on pairs of (name, key): distinct
// pairs get distinct Redis keys and distinct in-process entries, every
// Redis key has exactly one brace pair, its hash tag is the same for every
// limit of a call, and the key's part is at most callkey.MaxStandIn bytes. A key is
// its text repeated rep+1 times, so that long keys are explored; mode
// derives the second key from a rendering of the first's stand-in.
func FuzzStorageKey(f *testing.F) {
	f.Add("svc.Get", "alice", uint16(0), "svc.Get", "bob", uint16(0), uint8(0))
	f.Add("svc.Get", ":", uint16(callkey.MaxPart/3), "svc.Get", ":", uint16(callkey.MaxPart/3-1), uint8(0))
	f.Add("svc{x}.Get", "{}", uint16(4000), "svc{x}.Get", "", uint16(0), uint8(1))
	f.Add("n", "Bearer eyJ", uint16(100), "n", "", uint16(0), uint8(2))
	f.Add("n:", "a", uint16(70), "n", ":a", uint16(0), uint8(3))
	f.Fuzz(func(t *testing.T, name1, text1 string, rep1 uint16, name2, text2 string, rep2 uint16, mode uint8) {
		key1, key2 := repeat(text1, rep1), repeat(text2, rep2)
		b1 := callkey.Bound(key1)
		switch mode % 5 {
		case 1: // the stand-in as a key
			key2 = b1 + key2
		case 2: // its digest
			key2 = b1[strings.IndexByte(b1, ':')+1:] + key2
		case 3: // its Redis key
			key2 = storageKey("", name1, b1, 0, ratelimit.SlidingLog) + key2
		case 4: // one byte off
			key2 = key1[:len(key1)/2] + "\x00" + key1[len(key1)/2:]
		}
		b2 := callkey.Bound(key2)
		for _, p := range [][2]string{{name1, b1}, {name2, b2}} {
			k := storageKey("p:", p[0], p[1], 0, ratelimit.SlidingLog)
			open, end := strings.IndexByte(k, '{'), strings.IndexByte(k, '}')
			if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 || open > end {
				t.Fatalf("%q: not one brace pair", k)
			}
			if other := storageKey("p:", p[0], p[1], 3, ratelimit.GCRA); hashTag(other) != hashTag(k) {
				t.Fatalf("limits of one call in different slots: %q, %q", k, other)
			}
			var name strings.Builder
			callkey.Escape(&name, p[0])
			if len(p[1]) > callkey.MaxStandIn || len(k) > len("p:{")+name.Len()+len(":")+callkey.MaxStandIn+len("}:0:log") {
				t.Fatalf("%q is not bounded", k)
			}
		}
		same := name1 == name2 && key1 == key2
		if k1, k2 := storageKey("p:", name1, b1, 0, ratelimit.SlidingLog), storageKey("p:", name2, b2, 0, ratelimit.SlidingLog); (k1 == k2) != same {
			t.Fatalf("(%q, %.80q) and (%q, %.80q): Redis keys %q and %q", name1, key1, name2, key2, k1, k2)
		}
		if (name1 == name2 && b1 == b2) != same { // the identity of a memory limiter's state
			t.Fatalf("(%q, %.80q) and (%q, %.80q): entries %q and %q", name1, key1, name2, key2, b1, b2)
		}
	})
}

// BenchmarkRedisKeysVsPing interleaves PING and decisions of short keys
// on one connection: one kept as it is at a length check, a UUID (a scan)
// and an IPv6 address (a scan, and escaped) and reports each decision's
// median latency as a ratio to PING's.
func BenchmarkRedisKeysVsPing(b *testing.B) {
	keys := []string{"user-42", "550e8400-e29b-41d4-a716-446655440000", "2001:db8:85a3::8a2e:370:7334"}
	benchKeysVsPing(b, keys, []string{"short/ping", "uuid/ping", "ipv6/ping"})
}

// BenchmarkRedisLongKeyVsPing is BenchmarkRedisKeysVsPing for a 1 MB key.
func BenchmarkRedisLongKeyVsPing(b *testing.B) {
	benchKeysVsPing(b, []string{bearer(megabyte, 'A')}, []string{"1MB/ping"})
}

func benchKeysVsPing(b *testing.B, keys, units []string) {
	srv.Flush(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1})
	defer c.Close()
	ctx := context.Background()
	l := New(c)
	took := make([][]time.Duration, len(keys)+1)
	for range b.N {
		t0 := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		took[0] = append(took[0], time.Since(t0))
		for i, k := range keys {
			t0 := time.Now()
			if _, err := l.Allow(ctx, benchRequest(k)); err != nil {
				b.Fatal(err)
			}
			took[i+1] = append(took[i+1], time.Since(t0))
		}
	}
	p := median(took[0])
	b.ReportMetric(float64(p.Nanoseconds()), "ping-ns")
	for i, u := range units {
		b.ReportMetric(float64(median(took[i+1]))/float64(p), u)
	}
}

// repeat returns s repeated rep+1 times, up to 64 KiB.
func repeat(s string, rep uint16) string {
	return strings.Repeat(s, min(int(rep), 1<<16/(len(s)+1))+1)
}
