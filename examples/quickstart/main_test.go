package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	ratelimit "github.com/ratelimitgen/ratelimitgen/runtime"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

var srv *redistest.Server

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main() // the program itself, for TestDeadRedis
		os.Exit(0)
	}
	redistest.Main(m, &srv)
}

// runMainEnv makes the test binary run the program instead of the tests.
const runMainEnv = "QUICKSTART_RUN_MAIN"

// TestDeadRedis runs the program against a Redis that is gone: every call
// is decided by the fail-open policy, and stderr says so twice, not once
// per call: the start-up health check and the breaker's opening (go-redis's
// dial errors do not reach it).
func TestDeadRedis(t *testing.T) {
	dead, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	dead.Stop()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "REDIS_URL=redis://"+dead.Addr+"/0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v; stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), `call 6: Greet("Grace") allowed: Hello, Grace!`) {
		t.Errorf("the calls were not decided:\n%s", stdout.String())
	}
	if !saysOutageOnce(stderr.String()) {
		t.Errorf("stderr should hold the health check's warning and the circuit's opening, once each:\n%s", stderr.String())
	}
}

func TestDemo(t *testing.T) {
	srv.Flush(t) // each run starts with no calls in the window
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
			got := out.String()
			for _, want := range []string{
				`call 1: Greet("Ada") allowed: Hello, Ada!`,
				`call 3: Greet("Ada") allowed: Hello, Ada!`,
				`call 4: Greet("Ada") limited, retry after `,
				`call 5: Greet("Ada") limited, retry after `,
				`call 6: Greet("Grace") allowed: Hello, Grace!`,
			} {
				if !strings.Contains(got, want) {
					t.Errorf("output lacks %q:\n%s", want, got)
				}
			}
		})
	}
}

func TestNewLimiter(t *testing.T) {
	if _, backend, err := newLimiter(""); err != nil || backend != "in-process memory" {
		t.Errorf("no REDIS_URL: %q, %v", backend, err)
	}
	if _, backend, err := newLimiter("redis://" + srv.Addr + "/0"); err != nil || backend != "Redis at "+srv.Addr {
		t.Errorf("REDIS_URL: %q, %v", backend, err)
	}
	if _, _, err := newLimiter("http://nope"); err == nil {
		t.Error("a malformed REDIS_URL is accepted")
	}
}

// saysOutageOnce reports whether log holds exactly two lines: the start-up
// health check's warning and the breaker's opening.
func saysOutageOnce(log string) bool {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	return len(lines) == 2 && strings.Contains(lines[0], "WARNING: ratelimit: health check") &&
		strings.Contains(lines[1], "WARN ratelimit: circuit open")
}
