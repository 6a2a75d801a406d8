// Llmgateway is a small HTTP gateway in front of a completion provider (a
// fake one here, with deterministic token counts), limiting each API key
// to 5 requests and 1000 tokens a minute, 20,000 tokens a month and 2
// requests in flight, all in one decision per request, and the
// organisation to 20 requests a minute to the provider, for every key
// together. The tokens a completion takes are known only once it
// returns, so each request reserves its max_tokens and settles at the
// tokens it used (settle=resp.Usage.TotalTokens): what it did not use
// goes back to the key's budgets. A request the provider refused with a
// retryable error (a 429 or a 5xx) is given back whole
// (refund=retryable(err)): its request and its tokens. A provider's 429
// with a Retry-After pauses the organisation's provider line until then
// (cooldown=true), for every key and in every replica, so one 429 is not
// hit again by each. Once the script has run, the demo prints each key's
// usage against its budgets, read from httplimit.AdminHandler.
//
//	go run ./examples/llmgateway
//
// runs a scripted demo against the gateway on a loopback port, with the
// in-process limiter; with REDIS_URL set (such as
// redis://localhost:6379/0) the limits live in Redis, shared by every
// replica of the gateway, and with REDIS_CLUSTER_URL (such as
// redis://node-1:6379?addr=node-2:6379&addr=node-3:6379) in a Redis
// Cluster. With -listen it serves instead:
//
//	go run ./examples/llmgateway -listen localhost:8080
//	curl -H 'Authorization: Bearer alice' -d '{"prompt":"say hi","max_tokens":50}' localhost:8080/v1/completions
package main

//go:generate go run github.com/ratelimitgen/ratelimitgen/cmd/ratelimitgen

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"net/url"

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/httplimit"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

// CompletionRequest asks for a completion of at most MaxTokens tokens.
type CompletionRequest struct {
	APIKey string `json:"-"`
	// Org is the organisation whose provider account serves the request:
	// the gateway's own, the key of the provider line.
	Org       string `json:"-"`
	Prompt    string `json:"prompt"`
	MaxTokens int64  `json:"max_tokens"`
}

// Usage is what a completion took.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// Completion is a backend's answer.
type Completion struct {
	Text  string `json:"text"`
	Usage Usage  `json:"usage"`
}

// Completer completes prompts.
type Completer interface {
	// Complete takes one of its API key's 5 requests a minute, reserves
	// the request's max_tokens of its 1000 tokens a minute and 20,000 a
	// month, settles at the tokens the completion used, and runs at most
	// 2 completions per key at once; a completion the provider refused
	// with a retryable error takes nothing.
	//
	//ratelimit:period=1m threshold=5 key=req.APIKey refund=retryable(err)
	//ratelimit:period=1m threshold=1000 key=req.APIKey cost=req.MaxTokens settle=resp.Usage.TotalTokens
	//ratelimit:period=month threshold=20000 key=req.APIKey cost=req.MaxTokens settle=resp.Usage.TotalTokens
	//ratelimit:concurrency=2 key=req.APIKey lease=30s
	Complete(ctx context.Context, req *CompletionRequest) (resp *Completion, err error)
}

// Provider is the completion provider, whose account the organisation's
// keys share.
type Provider interface {
	// Complete takes one of the organisation's 20 requests a minute to
	// the provider: the line is keyed by the organisation, one key for
	// every API key's calls. A provider's refusal that says when to retry
	// (an httplimit.UpstreamError: a 429 or a 503 with Retry-After) pauses
	// the line until then, for every API key and in every replica sharing
	// the limiter: their calls are denied without reaching the provider.
	//
	//ratelimit:period=1m threshold=20 key=req.Org cooldown=true
	Complete(ctx context.Context, req *CompletionRequest) (*Completion, error)
}

// ProviderError is a provider's refusal that does not say when to retry,
// with its HTTP status.
type ProviderError struct{ Status int }

func (e *ProviderError) Error() string {
	return fmt.Sprintf("provider: %d %s", e.Status, http.StatusText(e.Status))
}

// providerError returns the error of the provider's refusal resp: an
// httplimit.UpstreamError when it says when to retry (a 429 or a 503 with
// a Retry-After), which cools the provider line; else a ProviderError.
func providerError(resp *http.Response) error {
	if err := httplimit.ResponseError(resp); err != nil {
		return fmt.Errorf("provider: %w", err)
	}
	return &ProviderError{Status: resp.StatusCode}
}

// retryable reports whether err is a provider's refusal worth retrying (a
// 429 or a 5xx), whose request the gateway gives back.
func retryable(err error) bool {
	var ue *httplimit.UpstreamError
	var pe *ProviderError
	return errors.As(err, &ue) || errors.As(err, &pe) && (pe.Status == http.StatusTooManyRequests || pe.Status >= 500)
}

// fakeBackend completes a prompt with deterministic token counts: a prompt
// token per word, and three completion tokens per prompt word, at most
// max_tokens. A prompt that starts with "slow" waits until hold is closed;
// one that starts with "busy" is refused with a 429 and "Retry-After: 1",
// as an HTTP provider answers.
type fakeBackend struct {
	hold    chan struct{}
	started chan string // told the prompt of each slow completion
}

func (b *fakeBackend) Complete(ctx context.Context, req *CompletionRequest) (*Completion, error) {
	words := strings.Fields(req.Prompt)
	if len(words) > 0 && words[0] == "busy" {
		return nil, providerError(&http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}})
	}
	if len(words) > 0 && words[0] == "slow" && b.hold != nil {
		if b.started != nil {
			b.started <- req.Prompt
		}
		select {
		case <-b.hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	prompt := int64(len(words))
	out := min(3*prompt, req.MaxTokens)
	text := strings.TrimSpace(strings.Repeat("token ", int(out)))
	return &Completion{Text: text, Usage: Usage{PromptTokens: prompt, CompletionTokens: out, TotalTokens: prompt + out}}, nil
}

// gatewayOf returns the gateway's Completer: each API key's limits
// (CompleterWithRateLimit) in front of the organisation's provider line
// (ProviderWithRateLimit) in front of provider. A reservation is made
// under one key, so the provider line, keyed by the organisation, is a
// decorator of its own: a call it denies (its cooldown, or the 20 a
// minute) is a denial further in, which gives the API key's reservation
// back whole.
func gatewayOf(provider Provider, limiter ratelimit.Limiter) Completer {
	return NewCompleterWithRateLimit(NewProviderWithRateLimit(provider, limiter), limiter)
}

// handler serves POST /v1/completions through the limited Completer, for
// the organisation org: the API key is the bearer token, a denial is 429
// with Retry-After.
func handler(c Completer, org string) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || key == "" {
			http.Error(w, "missing API key", http.StatusUnauthorized)
			return
		}
		var req CompletionRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.MaxTokens <= 0 {
			http.Error(w, "want a JSON body with a prompt and a positive max_tokens", http.StatusBadRequest)
			return
		}
		req.APIKey, req.Org = key, org
		resp, err := c.Complete(r.Context(), &req)
		if httplimit.WriteError(w, err) {
			return // 429, or 503 when the limiter failed closed
		}
		if err != nil {
			http.Error(w, "backend failed", http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	})
	return mux
}

func main() {
	listen := flag.String("listen", "", "serve on this address instead of running the demo")
	flag.Parse()
	limiter, backend, err := newLimiter(os.Getenv("REDIS_URL"), os.Getenv("REDIS_CLUSTER_URL"))
	if err != nil {
		log.Fatal(err)
	}
	if *listen != "" {
		log.Printf("limiter: %s; serving on %s", backend, *listen)
		mux := handler(gatewayOf(&fakeBackend{}, limiter), "acme")
		mux.Handle("/admin/ratelimit/", httplimit.AdminHandler(limiter, RateLimitRules())) // behind your own authentication
		log.Fatal(http.ListenAndServe(*listen, mux))
	}
	fmt.Printf("limiter: %s\n", backend)
	if err := demo(context.Background(), os.Stdout, limiter); err != nil {
		log.Fatal(err)
	}
}

// newLimiter returns the in-process limiter, a Redis one when url is set,
// or one on a Redis Cluster when clusterURL is (one node's URL, with the
// others as addr= parameters), and says which.
func newLimiter(url, clusterURL string) (ratelimit.Limiter, string, error) {
	switch {
	case url != "" && clusterURL != "":
		return nil, "", errors.New("REDIS_URL and REDIS_CLUSTER_URL are both set: set one")
	case clusterURL != "":
		opts, err := redis.ParseClusterURL(clusterURL)
		if err != nil {
			return nil, "", fmt.Errorf("REDIS_CLUSTER_URL: %w", err)
		}
		client := redis.NewClusterClient(redislimit.ClusterOptions(opts))
		return redislimit.New(client), "Redis Cluster at " + strings.Join(opts.Addrs, ", "), nil
	case url != "":
		opts, err := redis.ParseURL(url)
		if err != nil {
			return nil, "", fmt.Errorf("REDIS_URL: %w", err)
		}
		return redislimit.New(redis.NewClient(redislimit.ClientOptions(opts))), "Redis at " + opts.Addr, nil
	}
	return ratelimit.NewMemory(), "in-process memory", nil
}

// demo runs the gateway on a loopback port and sends it a script of
// requests, printing what each got: tokens settled at what a completion
// used, a request denied for want of tokens, a provider's 429 pausing
// every key, and a request denied while two of the same key are in
// flight; then each key's usage against its budgets. The keys and the
// organisation are the run's own, so that runs against one Redis within a
// minute do not meet each other's budgets.
func demo(ctx context.Context, w io.Writer, limiter ratelimit.Limiter) error {
	backend := &fakeBackend{hold: make(chan struct{}), started: make(chan string, 2)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	run := fmt.Sprint(time.Now().UnixNano())
	mux := handler(gatewayOf(backend, limiter), "acme-"+run)
	mux.Handle("/admin/ratelimit/", httplimit.AdminHandler(limiter, RateLimitRules()))
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Shutdown(ctx)
	base := "http://" + ln.Addr().String()
	g := &gateway{url: base + "/v1/completions", admin: base + "/admin/ratelimit/", run: run, w: w}

	fmt.Fprintln(w, "-- alice: 5 requests and 1000 tokens a minute; each request reserves its max_tokens and settles at what it used")
	for _, r := range []struct {
		prompt    string
		maxTokens int64
	}{
		{"write a haiku about rate limits", 400},
		{"now one about Redis", 400},
		{"and one about Go", 400}, // 1200 reserved in all, but 56 used
		{"a long essay please", 960},
		{"a shorter essay then", 900},
	} {
		if err := g.print(g.complete("alice", r.prompt, r.maxTokens)); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "-- carol: a provider's 429 is given back whole, and its Retry-After pauses the provider for every key")
	if err := g.print(g.complete("carol", "busy provider", 100)); err != nil {
		return err
	}
	if err := g.print(g.complete("dave", "hello", 100)); err != nil {
		return err
	}
	time.Sleep(1100 * time.Millisecond) // the provider's Retry-After: 1
	fmt.Fprintln(w, "-- a second later: carol's sixth request a minute is denied (the refused one did not count)")
	for range 6 {
		if err := g.print(g.complete("carol", "hello", 100)); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "-- bob: at most 2 requests in flight")
	slow := []string{"slow first question", "slow second question"}
	lines := make([]string, len(slow))
	errs := make([]error, len(slow))
	var wg sync.WaitGroup
	for i, prompt := range slow {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lines[i], errs[i] = g.complete("bob", prompt, 50)
		}()
		<-backend.started // in flight, holding a slot
	}
	if err := g.print(g.complete("bob", "a third at once", 50)); err != nil {
		return err
	}
	close(backend.hold)
	wg.Wait()
	for i := range slow {
		if err := g.print(lines[i], errs[i]); err != nil {
			return err
		}
	}
	if err := g.print(g.complete("bob", "once the others are done", 50)); err != nil {
		return err
	}
	fmt.Fprintln(w, "-- usage against the budgets (httplimit.AdminHandler, GET /admin/ratelimit/key)")
	for _, key := range []string{"alice", "bob", "carol", "dave"} {
		if err := g.print(g.usage(completerRule(), key+"-"+run, key)); err != nil {
			return err
		}
	}
	return g.print(g.usage(providerRule(), "acme-"+run, "the organisation, at the provider"))
}

// completerRule and providerRule return the names of the rules of
// Completer.Complete and Provider.Complete.
func completerRule() string { return ruleNamed(".Completer.Complete") }
func providerRule() string  { return ruleNamed(".Provider.Complete") }

// ruleNamed returns the name of the package's rule whose name ends in
// suffix.
func ruleNamed(suffix string) string {
	for _, r := range RateLimitRules() {
		if strings.HasSuffix(r.Name, suffix) {
			return r.Name
		}
	}
	return ""
}

// gateway is the demo's client.
type gateway struct {
	url, admin, run string
	w               io.Writer
}

// usage returns a line of what key (shown as who) used of each rate line
// of the rule called name, as the admin view tells it.
func (g *gateway) usage(name, key, who string) (string, error) {
	resp, err := http.Get(g.admin + "key?" + url.Values{"name": {name}, "key": {key}}.Encode())
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return "", errors.New("admin: " + resp.Status + ": " + string(msg))
	}
	var view struct {
		Lines []struct {
			Text  string `json:"text"`
			State *struct {
				Budget int64 `json:"budget"`
				Used   int64 `json:"used"`
			} `json:"state"`
		} `json:"lines"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&view); err != nil {
		return "", err
	}
	var parts []string
	for _, l := range view.Lines {
		if l.State != nil { // a concurrency line has no budget to use
			parts = append(parts, fmt.Sprintf("%d of %s", l.State.Used, l.Text))
		}
	}
	return who + ": " + strings.Join(parts, "; "), nil
}

// print prints line, unless err.
func (g *gateway) print(line string, err error) error {
	if err == nil {
		fmt.Fprintln(g.w, line)
	}
	return err
}

// complete sends one request and returns a line saying what it got.
func (g *gateway) complete(key, prompt string, maxTokens int64) (string, error) {
	body, _ := json.Marshal(CompletionRequest{Prompt: prompt, MaxTokens: maxTokens})
	req, err := http.NewRequest(http.MethodPost, g.url, strings.NewReader(string(body)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+key+"-"+g.run)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	line := fmt.Sprintf("%s %q max_tokens=%d: ", key, prompt, maxTokens)
	switch resp.StatusCode {
	case http.StatusOK:
		var c Completion
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
			return "", err
		}
		return line + fmt.Sprintf("200, used %d tokens (%d of the reservation given back)", c.Usage.TotalTokens, maxTokens-c.Usage.TotalTokens), nil
	case http.StatusTooManyRequests:
		msg, _ := io.ReadAll(resp.Body)
		return line + fmt.Sprintf("429, Retry-After %ss: %s", resp.Header.Get("Retry-After"), shorten(string(msg), g.run)), nil
	case http.StatusBadGateway:
		return line + "502, the provider refused it", nil
	}
	msg, _ := io.ReadAll(resp.Body)
	return "", errors.New(resp.Status + ": " + string(msg))
}

// shorten drops the run's suffix from the keys in a message, and its end
// of line.
func shorten(msg, run string) string {
	return strings.TrimSpace(strings.ReplaceAll(msg, "-"+run, ""))
}
