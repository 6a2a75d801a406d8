package main

import (
	"context"
	"errors"
	"sync"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/templates"
)

// supported caches what the runtime said about each limit probed.
var supported sync.Map // templates.Limit → error

// runtimeSupports reports whether the runtime this generator is built with
// can decide limit l, and if not why (an error wrapping
// ratelimit.ErrInvalidLimit, such as for an algorithm it does not
// implement). It asks an in-process limiter, which decides exactly as the
// Redis one does; ratelimitgen and the runtime are one module, so the
// answer holds for the runtime the generated code runs with.
func runtimeSupports(l templates.Limit) error {
	if v, ok := supported.Load(l); ok {
		err, _ := v.(error) // nil when supported
		return err
	}
	_, err := ratelimit.NewMemory().Allow(context.Background(), ratelimit.Request{
		Name: "ratelimitgen/probe",
		Limits: []ratelimit.Limit{{
			Period: l.Period, Threshold: l.Threshold, Algorithm: ratelimit.Algorithm(l.Algorithm),
			Burst: l.Burst, Capacity: l.Capacity,
		}},
	})
	if !errors.Is(err, ratelimit.ErrInvalidLimit) {
		err = nil
	}
	supported.Store(l, err)
	return err
}
