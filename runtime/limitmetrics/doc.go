// Package limitmetrics counts a limiter's decisions and failures per limit
// name, and its circuit breakers' openings per node, with atomic counters,
// for exporting to a monitoring system:
//
//	m := &limitmetrics.Metrics{}
//	limiter := ratelimit.NewMemory(ratelimit.WithHook(m))
//	…
//	for name, c := range m.Snapshot() {
//		fmt.Println(name, c.Allowed, c.Limited)
//	}
//
// The adapters of the repository (Prometheus, OpenTelemetry) export the
// same counts through hooks of their own.
package limitmetrics
