package redislimit

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// knobs are what tests change in a Limiter and users cannot.
type knobs struct {
	// generic decides calls of a single limit with the generic script.
	generic bool
	// quiet keeps the limiter out of the heartbeat.
	quiet bool
}

// testOption is an Option that sets a knob of the Limiter newTest makes;
// New ignores it.
type testOption func(*knobs)

// Configure leaves c as it is.
func (testOption) Configure(*ratelimit.Config) {}

// withGenericScript makes a Limiter decide every call with the generic
// decide script, as it does calls of several limits, so the tests check it
// on single limits too.
func withGenericScript() Option { return testOption(func(k *knobs) { k.generic = true }) }

// withoutHeartbeat keeps a limiter out of the heartbeat, and its key out
// of the server: a test that flushes the server while its limiters live
// on takes it, since a limiter in the heartbeat takes a flush for Redis's
// state lost and charges back what Redis had admitted it (its ledger).
func withoutHeartbeat() Option { return testOption(func(k *knobs) { k.quiet = true }) }

// newTest returns the Limiter New returns for client and opts, with the
// knobs that the test options among opts set.
func newTest(client redis.UniversalClient, opts ...Option) *Limiter {
	var k knobs
	for _, o := range opts {
		if o, ok := o.(testOption); ok {
			o(&k)
		}
	}
	l := newLimiter(client, opts, !k.quiet)
	l.genericOnly = k.generic
	return l
}

// skewClientClock makes the client's clock read skew off time.Now until
// the test ends.
func skewClientClock(t testing.TB, skew time.Duration) {
	t.Cleanup(func() { clientClock = time.Now })
	clientClock = func() time.Time { return time.Now().Add(skew) }
}
