package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// TestDemo runs the README's demo on both limiters: its output is the
// README's, but for the lines' order, which it fixes.
func TestDemo(t *testing.T) {
	client := srv.Client()
	defer client.Close()
	for name, limiter := range map[string]ratelimit.Limiter{
		"memory": ratelimit.NewMemory(),
		"redis":  redislimit.New(client),
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := demo(context.Background(), &out, limiter); err != nil {
				t.Fatal(err)
			}
			want := demoOutput
			if got := out.String(); got != want {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// demoOutput is what the demo prints, on any limiter.
const demoOutput = `-- alice: 5 requests and 1000 tokens a minute; each request reserves its max_tokens and settles at what it used
alice "write a haiku about rate limits" max_tokens=400: 200, used 24 tokens (376 of the reservation given back)
alice "now one about Redis" max_tokens=400: 200, used 16 tokens (384 of the reservation given back)
alice "and one about Go" max_tokens=400: 200, used 16 tokens (384 of the reservation given back)
alice "a long essay please" max_tokens=960: 429, Retry-After 60s: Too Many Requests: retry after 60 s
alice "a shorter essay then" max_tokens=900: 200, used 16 tokens (884 of the reservation given back)
-- carol: a provider's 429 is given back whole, and its Retry-After pauses the provider for every key
carol "busy provider" max_tokens=100: 502, the provider refused it
dave "hello" max_tokens=100: 429, Retry-After 1s: Too Many Requests: cooling down, an upstream asked for a pause; retry after 1 s
-- a second later: carol's sixth request a minute is denied (the refused one did not count)
carol "hello" max_tokens=100: 200, used 4 tokens (96 of the reservation given back)
carol "hello" max_tokens=100: 200, used 4 tokens (96 of the reservation given back)
carol "hello" max_tokens=100: 200, used 4 tokens (96 of the reservation given back)
carol "hello" max_tokens=100: 200, used 4 tokens (96 of the reservation given back)
carol "hello" max_tokens=100: 200, used 4 tokens (96 of the reservation given back)
carol "hello" max_tokens=100: 429, Retry-After 60s: Too Many Requests: retry after 60 s
-- bob: at most 2 requests in flight
bob "a third at once" max_tokens=50: 429, Retry-After 30s: Too Many Requests: too many calls in flight; retry after 30 s
bob "slow first question" max_tokens=50: 200, used 12 tokens (38 of the reservation given back)
bob "slow second question" max_tokens=50: 200, used 12 tokens (38 of the reservation given back)
bob "once the others are done" max_tokens=50: 200, used 20 tokens (30 of the reservation given back)
-- usage against the budgets (httplimit.AdminHandler, GET /admin/ratelimit/key)
alice: 4 of 5/1m0s (sliding_log); 72 of 1000/1m0s (sliding_log); 72 of 20000/month (fixed_window)
bob: 3 of 5/1m0s (sliding_log); 44 of 1000/1m0s (sliding_log); 44 of 20000/month (fixed_window)
carol: 5 of 5/1m0s (sliding_log); 20 of 1000/1m0s (sliding_log); 20 of 20000/month (fixed_window)
dave: 0 of 5/1m0s (sliding_log); 0 of 1000/1m0s (sliding_log); 0 of 20000/month (fixed_window)
the organisation, at the provider: 13 of 20/1m0s (sliding_log)
`

// TestDemoOnACluster runs the demo on a 3-master Redis Cluster, reached as
// main does with REDIS_CLUSTER_URL (one node's URL, the others as addr=
// parameters): the same output.
func TestDemoOnACluster(t *testing.T) {
	c, err := redistest.StartCluster(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	addrs := c.Addrs()
	url := "redis://" + addrs[0] + "?addr=" + strings.Join(addrs[1:], "&addr=")
	limiter, backend, err := newLimiter("", url)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Redis Cluster at " + strings.Join(addrs, ", "); backend != want {
		t.Errorf("newLimiter says %q, want %q", backend, want)
	}
	var out bytes.Buffer
	if err := demo(context.Background(), &out, limiter); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != demoOutput {
		t.Errorf("got:\n%s\nwant:\n%s", got, demoOutput)
	}
	if _, _, err := newLimiter("redis://localhost:6379", url); err == nil {
		t.Error("newLimiter took REDIS_URL and REDIS_CLUSTER_URL at once")
	}
}

// TestREADMEShowsTheDemo keeps the README's output the demo's.
func TestREADMEShowsTheDemo(t *testing.T) {
	var out bytes.Buffer
	if err := demo(context.Background(), &out, ratelimit.NewMemory()); err != nil {
		t.Fatal(err)
	}
	readme := mustRead(t, "README.md")
	if !strings.Contains(readme, "limiter: in-process memory\n"+out.String()) {
		t.Errorf("README.md does not show the demo's output:\n%s", out.String())
	}
}

func mustRead(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
