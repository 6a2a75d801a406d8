package redislimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
)

// BenchmarkReserveSettleVsPing interleaves PING, a decision (Allow), a
// reservation (Reserve: one script run), its settle (Adjust, a refund of
// half: one script run), a concurrency slot taken alone (ReserveSlot: one
// script run) and given back (ReleaseSlot: one ZREM), and a decision in
// its turn with nobody waiting (AllowInTurn: the queue script), on one
// connection, and reports each one's median latency as a ratio to PING's. Each
// algorithm is a sub-benchmark; every call is admitted.
func BenchmarkReserveSettleVsPing(b *testing.B) {
	for _, alg := range ratelimit.Algorithms() {
		lim := benchRequest("").Limits[0]
		lim.Algorithm = alg
		b.Run(string(alg), func(b *testing.B) { benchReserveVsPing(b, lim) })
	}
}

func benchReserveVsPing(b *testing.B, lim ratelimit.Limit) {
	srv.Flush(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1})
	defer c.Close()
	ctx := context.Background()
	l := newTest(c, withoutHeartbeat())
	req := ratelimit.Request{Name: "bench", Cost: 2, Limits: []ratelimit.Limit{lim}}
	slot := concurrencyLimit(1_000_000, time.Minute)
	alone := ratelimit.Request{Name: "bench-slot"}
	// Warm every script.
	if _, at, err := l.Reserve(ctx, req); err != nil || l.Adjust(ctx, req, at, -1) != nil {
		b.Fatal(err)
	}
	if _, _, err := l.ReserveSlot(ctx, alone, slot, "warm"); err != nil {
		b.Fatal(err)
	}
	var ping, allow, reserve, settle, take, give, inTurn []time.Duration
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if d, err := l.Allow(ctx, req); err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
		t2 := time.Now()
		d, at, err := l.Reserve(ctx, req)
		if err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
		t3 := time.Now()
		if err := l.Adjust(ctx, req, at, -1); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		token := fmt.Sprint("t", i)
		if d, _, err := l.ReserveSlot(ctx, alone, slot, token); err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
		t5 := time.Now()
		if err := l.ReleaseSlot(ctx, alone, slot, token); err != nil {
			b.Fatal(err)
		}
		t6 := time.Now()
		if d, _, _, err := l.AllowInTurn(ctx, req, 0, time.Minute); err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
		t7 := time.Now()
		inTurn = append(inTurn, t7.Sub(t6))
		ping = append(ping, t1.Sub(t0))
		allow = append(allow, t2.Sub(t1))
		reserve = append(reserve, t3.Sub(t2))
		settle = append(settle, t4.Sub(t3))
		take = append(take, t5.Sub(t4))
		give = append(give, t6.Sub(t5))
	}
	b.StopTimer()
	p := median(ping)
	b.ReportMetric(float64(p.Nanoseconds()), "ping-ns")
	b.ReportMetric(float64(median(allow))/float64(p), "allow/ping")
	b.ReportMetric(float64(median(reserve))/float64(p), "reserve/ping")
	b.ReportMetric(float64(median(settle))/float64(p), "settle/ping")
	b.ReportMetric(float64(median(take))/float64(p), "slot-take/ping")
	b.ReportMetric(float64(median(give))/float64(p), "slot-give/ping")
	b.ReportMetric(float64(median(inTurn))/float64(p), "in-turn/ping")
}
