package check

import (
	"github.com/ratelimitgen/ratelimitgen/model"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// runtimeSupports reports whether the runtime this generator is built with
// can decide limit l, and if not why (an error wrapping
// ratelimit.ErrInvalidLimit, such as for an algorithm it does not
// implement). ratelimitgen and the runtime are one module, so the answer
// holds for the runtime the generated code runs with.
func runtimeSupports(l model.Limit) error {
	return ratelimit.Limit{
		Period:    l.Period,
		Threshold: l.Threshold,
		Algorithm: ratelimit.Algorithm(l.Algorithm),
		Burst:     l.Burst,
		Capacity:  l.Capacity,
	}.Validate()
}
