// Llmgateway is a small HTTP gateway in front of a completion backend (a
// fake one here, with deterministic token counts), limiting each API key
// to 5 requests and 1000 tokens a minute, 20,000 tokens a month and 2
// requests in flight, all in one decision per request. The tokens a
// completion takes are known only once it returns, so each request
// reserves its max_tokens and settles at the tokens it used
// (settle=resp.Usage.TotalTokens): what it did not use goes back to the
// key's budgets. A request the provider refused with a retryable error
// (a 429 or a 5xx) is given back whole (refund=retryable(err)): its
// request and its tokens.
//
//	go run ./examples/llmgateway
//
// runs a scripted demo against the gateway on a loopback port, with the
// in-process limiter; with REDIS_URL set (such as
// redis://localhost:6379/0) the limits live in Redis, shared by every
// replica of the gateway. With -listen it serves instead:
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

	"github.com/redis/go-redis/v9"

	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/httplimit"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

// CompletionRequest asks for a completion of at most MaxTokens tokens.
type CompletionRequest struct {
	APIKey    string `json:"-"`
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

// ProviderError is a provider's refusal, with its HTTP status.
type ProviderError struct{ Status int }

func (e *ProviderError) Error() string {
	return fmt.Sprintf("provider: %d %s", e.Status, http.StatusText(e.Status))
}

// retryable reports whether err is a provider's refusal worth retrying (a
// 429 or a 5xx), whose request the gateway gives back.
func retryable(err error) bool {
	var pe *ProviderError
	return errors.As(err, &pe) && (pe.Status == http.StatusTooManyRequests || pe.Status >= 500)
}

// fakeBackend completes a prompt with deterministic token counts: a prompt
// token per word, and three completion tokens per prompt word, at most
// max_tokens. A prompt that starts with "slow" waits until hold is closed;
// one that starts with "busy" is refused with a 429.
type fakeBackend struct {
	hold    chan struct{}
	started chan string // told the prompt of each slow completion
}

func (b *fakeBackend) Complete(ctx context.Context, req *CompletionRequest) (*Completion, error) {
	words := strings.Fields(req.Prompt)
	if len(words) > 0 && words[0] == "busy" {
		return nil, &ProviderError{Status: http.StatusTooManyRequests}
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

// handler serves POST /v1/completions through the limited Completer: the
// API key is the bearer token, a denial is 429 with Retry-After.
func handler(c Completer) http.Handler {
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
		req.APIKey = key
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
	limiter, backend, err := newLimiter(os.Getenv("REDIS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	if *listen != "" {
		log.Printf("limiter: %s; serving on %s", backend, *listen)
		log.Fatal(http.ListenAndServe(*listen, handler(NewCompleterWithRateLimit(&fakeBackend{}, limiter))))
	}
	fmt.Printf("limiter: %s\n", backend)
	if err := demo(context.Background(), os.Stdout, limiter); err != nil {
		log.Fatal(err)
	}
}

// newLimiter returns the in-process limiter, or a Redis one when url is
// set, and says which.
func newLimiter(url string) (ratelimit.Limiter, string, error) {
	if url == "" {
		return ratelimit.NewMemory(), "in-process memory", nil
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, "", fmt.Errorf("REDIS_URL: %w", err)
	}
	return redislimit.New(redis.NewClient(redislimit.ClientOptions(opts))), "Redis at " + opts.Addr, nil
}

// demo runs the gateway on a loopback port and sends it a script of
// requests, printing what each got: tokens settled at what a completion
// used, a request denied for want of tokens, and one denied while two of
// the same key are in flight. The keys are the run's own, so that runs
// against one Redis within a minute do not meet each other's budgets.
func demo(ctx context.Context, w io.Writer, limiter ratelimit.Limiter) error {
	backend := &fakeBackend{hold: make(chan struct{}), started: make(chan string, 2)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler(NewCompleterWithRateLimit(backend, limiter))}
	go srv.Serve(ln)
	defer srv.Shutdown(ctx)
	run := fmt.Sprint(time.Now().UnixNano())
	g := &gateway{url: "http://" + ln.Addr().String() + "/v1/completions", run: run, w: w}

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
	fmt.Fprintln(w, "-- carol: a provider's 429 is given back whole; the sixth request a minute is denied")
	for _, prompt := range []string{"busy provider", "busy provider", "busy provider", "hello", "hello", "hello", "hello", "hello", "hello"} {
		if err := g.print(g.complete("carol", prompt, 100)); err != nil {
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
	return g.print(g.complete("bob", "once the others are done", 50))
}

// gateway is the demo's client.
type gateway struct {
	url, run string
	w        io.Writer
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
