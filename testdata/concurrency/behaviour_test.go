package concurrency

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/testdata/internal/backends"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// exporter runs its calls until told to return, or panics.
type exporter struct {
	started chan struct{}
	finish  chan struct{}
	panics  bool
}

func (e *exporter) Export(context.Context, string) error {
	e.started <- struct{}{}
	<-e.finish
	if e.panics {
		panic("export failed")
	}
	return nil
}

func (e *exporter) Query(context.Context, string) (int, error) { return 0, nil }
func (e *exporter) Scan(context.Context) (int64, error)        { return 5, nil }

func TestAtMostTwoExportsPerTenantInFlight(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		ctx := context.Background()
		e := &exporter{started: make(chan struct{}, 3), finish: make(chan struct{})}
		d := NewExporterWithRateLimit(e, limiter)
		done := make(chan error, 2)
		for range 2 {
			go func() { done <- d.Export(ctx, "acme") }()
			<-e.started
		}
		err := d.Export(ctx, "acme")
		var le *ratelimit.LimitError
		require.ErrorAs(t, err, &le)
		require.Equal(t, ratelimit.Algorithm("concurrency"), le.Limit.Algorithm)
		require.Equal(t, "acme", le.Key)

		close(e.finish)
		for range 2 {
			require.NoError(t, <-done)
		}
		require.NoError(t, d.Export(ctx, "acme"), "the slots are back")
	})
}

func (e *exporter) exportRecovering(d *ExporterWithRateLimit) (err error) {
	defer func() { recover() }()
	return d.Export(context.Background(), "acme")
}

func TestAPanickingCallGivesItsSlotBack(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		e := &exporter{started: make(chan struct{}, 10), finish: make(chan struct{}), panics: true}
		close(e.finish)
		d := NewExporterWithRateLimit(e, limiter)
		for range 5 { // more than the two slots
			require.NoError(t, e.exportRecovering(d))
		}
	})
}

func TestScanSettlesAndReleases(t *testing.T) {
	backends.Each(t, srv, func(t *testing.T, limiter ratelimit.Limiter) {
		d := NewExporterWithRateLimit(&exporter{}, limiter)
		ctx := context.Background()
		// Each scan reserves 10 and settles at 5, one at a time: the 50
		// units per second fit ten scans, the 9th finding 10 left.
		for range 9 {
			_, err := d.Scan(ctx)
			require.NoError(t, err)
		}
		_, err := d.Scan(ctx)
		require.ErrorIs(t, err, ratelimit.ErrLimited)
	})
}
