package limitertest

import (
	"testing"
	"time"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// hooks: each limiter reports every decision of a sequence to the hook of
// WithHook as its twin does: a limitmetrics.Metrics of each counts the same
// admissions, denials, shadow denials and near-limit admissions per name,
// and the same calls holding a concurrency slot, after every call. The
// deny cache's count (Counters.Cached) is the backend's own.
func (s *suite) hooks(t *testing.T, alg ratelimit.Algorithm) {
	need(t, "report decisions (ratelimit.WithHook)", s.caps.hooks)
	s.needClock(t)
	const period = 20 * time.Millisecond
	real := &ratelimit.Rule{Name: "hooks", Limits: []ratelimit.Limit{limit(alg, period)}}
	shadow := &ratelimit.Rule{Name: "hooks/shadow", Limits: real.Limits, Shadow: true}
	slots := &ratelimit.Rule{Name: "hooks/slots", Limits: []ratelimit.Limit{limit(alg, period), {Algorithm: concurrency, Threshold: 2}}}
	s.runHooked(t, func(e *env) {
		rng := rng(t)
		var held []reservations
		for range calls {
			e.advance(step(rng, period))
			switch n := rng.IntN(6); {
			case n < 2:
				e.admit(real, keys[rng.IntN(2)], nil, 1+rng.Int64N(2))
			case n < 4:
				e.admit(shadow, keys[rng.IntN(2)], nil, 1+rng.Int64N(2))
			case s.caps.slots != "":
			case len(held) > 0 && n == 4:
				e.release(held[0])
				held = held[1:]
			default:
				if _, res := e.reserve(slots, "ada", 1); res.got != nil {
					held = append(held, res)
				}
			}
			got, want := e.gotHook.Snapshot(), e.wantHook.Snapshot()
			for name, c := range got {
				c.Cached = 0
				got[name] = c
			}
			e.check(len(got) == len(want), "the hooks saw names %v, the twin's %v", got, want)
			for name, c := range want {
				e.check(got[name] == c, "%s: the hook counted\n backend %+v\n    twin %+v", name, got[name], c)
			}
		}
		for _, res := range held {
			e.release(res)
		}
	})
}
