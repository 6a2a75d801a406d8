package guard

import (
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// Option configures the guards made by [Wrap], which uses every Option
// (the guards are made by Wrap alone, but for [NewLeases], which takes
// none). Only this package makes Options, so another package's option
// (a ratelimit.Option, a redislimit option) is a compile error where an
// Option is taken: the guards read the rest of their configuration from
// the backend's [ratelimit.Abilities]. An Option is not a ratelimit.Option
// either (passing one to a limiter without guards, such as
// ratelimit.NewMemory, does not compile); its Configure, which changes
// nothing, lets a backend whose options are any value with that method
// (as redislimit's) take it in the same list.
type Option struct{ set func(*settings) }

// option returns the Option that runs set.
func option(set func(*settings)) Option { return Option{set: set} }

// Configure leaves c as it is: the guards read the option itself.
func (Option) Configure(*ratelimit.Config) {}

// settings are what the options of this package set.
type settings struct {
	// denyCache is the deny cache's size in entries; 0 turns it off.
	denyCache int
	// denyHold bounds how long the deny cache holds a denial.
	denyHold time.Duration
	// denySlack is the backend's slack (see WithDenySlack), or nil.
	denySlack func([]ratelimit.Limit) time.Duration
	// breaker tunes the circuit breakers.
	breaker breakerConfig
	// fallbackProcesses divides the limits of the local fallback; 0:
	// the fleet's count.
	fallbackProcesses int
}

// newSettings returns the settings that the options of this package among
// opts set, over the defaults.
func newSettings(opts []Option) settings {
	s := settings{
		denyCache: DefaultDenyCache,
		denyHold:  DefaultDenyHold,
		breaker:   breakerConfig{failures: DefaultBreakerFailures, backoff: DefaultBreakerBackoff, maxBackoff: DefaultBreakerMaxBackoff},
	}
	for _, o := range opts {
		if o.set != nil {
			o.set(&s)
		}
	}
	return s
}

// DefaultDenyCache is how many denials a deny cache remembers unless
// [WithDenyCache] says otherwise.
const DefaultDenyCache = 1 << 16

// DefaultDenyHold is how long the deny cache holds a denial at most unless
// [WithDenyHold] says otherwise.
const DefaultDenyHold = time.Second

// WithDenyCache sizes the deny cache: it remembers up to about entries
// recent denials of its backend (rounded up to a power of two; 0 turns the
// cache off) and repeats them without asking the backend, answering
// exactly what the backend would answer then, with Source
// [ratelimit.SourceCache]. It repeats only denials that no call could
// change until they end (Remaining 0, for calls of cost 1, or of any cost
// against a fixed window) and holds each at most the deny hold
// ([WithDenyHold]), so state lost out of band is seen within that bound.
// On by default ([DefaultDenyCache] entries, a few MiB at most).
func WithDenyCache(entries int) Option {
	return option(func(s *settings) { s.denyCache = entries })
}

// WithDenySlack tells the deny cache its backend's slack: a backend whose
// denials may tell their times from the start of a coarser tick than the
// clock it decides on says, with slack, how much earlier than its
// RetryAfter says a denial of a call of limits may end (Redis's window
// scripts on the server's clock: a millisecond; redislimit.New passes
// it). The cache holds such a denial that much less. None by default.
func WithDenySlack(slack func(limits []ratelimit.Limit) time.Duration) Option {
	return option(func(s *settings) { s.denySlack = slack })
}

// WithDenyHold bounds how long the deny cache repeats a denial without
// asking the backend again (default [DefaultDenyHold]), and so how long
// every process takes to see state that was lost or reset out of band;
// d <= 0 keeps the default.
func WithDenyHold(d time.Duration) Option {
	return option(func(s *settings) {
		if d > 0 {
			s.denyHold = d
		}
	})
}

// WithBreaker tunes the circuit breaker guard ([Breaker]): after failures
// consecutive calls failed because the backend was unavailable (see
// [Probed]), the call that failed last asks the backend's probe whether
// it answers; if it does not either, the breaker opens (if it does, the
// count starts again: a backend that answers slowly, or a process starved
// of CPU, is load, not an outage), and the guard stops passing calls on and
// fails every call at once with a [*ratelimit.BackendError] wrapping
// [ratelimit.ErrCircuitOpen], so the rule's [ratelimit.ErrorPolicy]
// applies without waiting for the backend's timeouts. While it is open,
// one goroutine of the breaker asks the backend whether it is back with a
// probe, backoff after the breaker opened and then backoff after each
// probe began (or when it ended, if it took longer); each failed probe
// doubles that wait, up to maxBackoff. The first probe that the backend
// answers closes the breaker (so does a call sent before it opened that
// the backend answers late), and the goroutine ends. Calls never probe:
// an open breaker sends at most one probe per backoff, however many calls
// it refuses.
//
// The defaults are [DefaultBreakerFailures], [DefaultBreakerBackoff] and
// [DefaultBreakerMaxBackoff]; failures <= 0 turns the breaker off, and a
// non-positive duration keeps its default. A backend that reports
// [Probed.PerNode] has a breaker (and a probe) per node. A call whose context ended counts neither way:
// the caller gave up, the backend may be fine; nor does a call the
// backend's client was too busy to send ([ratelimit.ErrBusy]): our own
// load is not an outage. A [ratelimit.Hook] that
// implements [ratelimit.BreakerHook] is told when a breaker opens and
// closes; unless the hook logs it (a ratelimit.SlogHook, alone or beside
// others in [ratelimit.WithHook]), the opening is also logged at Warn and the closing at
// Info to slog.Default(), so an outage says so once, whatever the hook.
func WithBreaker(failures int, backoff, maxBackoff time.Duration) Option {
	return option(func(s *settings) {
		s.breaker.failures = failures
		if backoff > 0 {
			s.breaker.backoff = backoff
		}
		if maxBackoff > 0 {
			s.breaker.maxBackoff = maxBackoff
		}
	})
}

// WithFallbackProcesses gives each of n processes sharing one backend a
// share of every limit while the local fallback ([Fallback]) decides
// ([ratelimit.FailLocal]), so that together they admit about the limit,
// not n times it, during an outage: the fallback divides each threshold,
// and each burst and capacity that is set, by n, rounding down but never
// below 1 (with a threshold below n the processes together admit up to n
// per period). A call whose cost is above its process's share of a
// limit's burst or capacity can never be admitted by the fallback.
//
// Without it, n is the number of processes sharing the backend, as their
// heartbeat ([JoinFleet], around a [Heartbeater] backend) last counted
// them before the outage (1 if it never could, or without a heartbeat).
// n < 1 keeps the heartbeat's count; n >= 1 fixes n and turns the
// heartbeat off.
func WithFallbackProcesses(n int) Option {
	return option(func(s *settings) {
		if n >= 1 {
			s.fallbackProcesses = n
		}
	})
}
