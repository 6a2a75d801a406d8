// Package redistest starts real redis-server processes for tests.
//
// Each test package calls [Start] (usually from TestMain through [Main])
// to get its own server on a free loopback port, so packages tested in
// parallel never share state. If redis-server is not installed the tests
// fail with a message saying how to install it; they are never skipped.
package redistest

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// InstallHint says how to get redis-server when it is missing.
const InstallHint = "redis-server is required by the tests: install it with `apt-get install -y redis-server` (Debian/Ubuntu) or `brew install redis` (macOS), or set REDIS_SERVER to its path"

// Server is a running redis-server.
type Server struct {
	// Addr is the server's host:port on loopback.
	Addr   string
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited
	stderr bytes.Buffer  // read only once exited
	dir    string
}

// Binary returns the redis-server to run: $REDIS_SERVER, or redis-server
// from PATH.
func Binary() (string, error) {
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("%s (%w)", InstallHint, err)
	}
	return p, nil
}

// Start runs a redis-server on a free loopback port with no persistence and
// waits until it answers PING. extra are further config directives, such as
// "cluster-enabled yes".
func Start(extra ...string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	return startWith(bin, extra)
}

// startWith runs bin (redis-server, or redis-sentinel) like [Start].
func startWith(bin string, extra []string) (*Server, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		s, err := startOn(bin, dir, extra)
		if err == nil || attempt == 4 {
			if err != nil {
				os.RemoveAll(dir)
			}
			return s, err
		}
	}
}

// StartOn runs a redis-server like [Start], but on the loopback address
// addr ("127.0.0.1:port"), such as that of a server stopped earlier, so a
// test can bring a server back where its clients expect it. It fails if
// the port is taken.
func StartOn(addr string, extra ...string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return nil, fmt.Errorf("port of %s: %w", addr, err)
	}
	// Another server on addr would answer the readiness PING.
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	l.Close()
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	s, err := startOnPort(bin, dir, port, extra)
	if err != nil {
		os.RemoveAll(dir)
	}
	return s, err
}

func startOn(bin, dir string, extra []string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return startOnPort(bin, dir, port, extra)
}

func startOnPort(bin, dir string, port int, extra []string) (*Server, error) {
	conf := []string{
		"port " + strconv.Itoa(port),
		"bind 127.0.0.1",
		"save \"\"",
		"appendonly no",
		"dir " + dir,
		"daemonize no",
		"loglevel warning",
		"logfile " + filepath.Join(dir, "redis-"+strconv.Itoa(port)+".log"),
	}
	conf = append(conf, extra...)
	path := filepath.Join(dir, "redis-"+strconv.Itoa(port)+".conf")
	if err := os.WriteFile(path, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, path)
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, exited: make(chan struct{}), dir: dir}
	cmd.Stderr = &s.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(readyTimeout); err != nil {
		s.kill()
		return nil, err
	}
	return s, nil
}

// readyTimeout bounds the wait for a server to answer PING: generous, for
// a loaded machine, since the wait ends as soon as it answers.
const readyTimeout = 2 * time.Minute

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if err := ping(s.Addr); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer PING within %s: %w; log: %s",
				s.Addr, timeout, err, s.log())
		}
		select {
		case <-s.exited: // such as when another process took the port
			return fmt.Errorf("redis-server on %s exited: %s; stderr: %s; log: %s", s.Addr, s.cmd.ProcessState, s.stderr.String(), s.log())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}

func (s *Server) log() string {
	matches, _ := filepath.Glob(filepath.Join(s.dir, "redis-*.log"))
	var b strings.Builder
	for _, m := range matches {
		data, _ := os.ReadFile(m)
		b.Write(data)
	}
	return b.String()
}

func (s *Server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// Signal sends sig to the server's process, such as SIGSTOP and SIGCONT
// to stall it and let it go on.
func (s *Server) Signal(sig os.Signal) error {
	return s.cmd.Process.Signal(sig)
}

// Stop kills the server and removes its files.
func (s *Server) Stop() {
	s.kill()
	os.RemoveAll(s.dir)
}

// Client returns a new client of the server; the caller closes it.
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr})
}

// Unreachable returns a client of a loopback port where a server was
// started and stopped, so nobody listens, with one attempt per command and
// a short dial timeout; it is closed when the test ends.
func Unreachable(tb testing.TB) *redis.Client {
	tb.Helper()
	s, err := Start()
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	s.Stop()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	tb.Cleanup(func() { c.Close() })
	return c
}

// Flush empties the server's database so a test starts from nothing.
func (s *Server) Flush(tb testing.TB) {
	tb.Helper()
	c := s.Client()
	defer c.Close()
	if err := c.FlushAll(context.Background()).Err(); err != nil {
		tb.Fatalf("FLUSHALL: %v", err)
	}
}

// Main starts a server, stores it in *s, runs the package's tests and
// stops it. Use it from TestMain:
//
//	var srv *redistest.Server
//	func TestMain(m *testing.M) { redistest.Main(m, &srv) }
//
// With [ShardEnv] set, it runs one shard of the tests, and alone names
// the package's longest tests, each to run in a shard of its own while
// there are shards enough.
func Main(m *testing.M, s **Server, alone ...string) {
	if err := selectShard(alone); err != nil {
		fmt.Fprintln(os.Stderr, "redistest:", err)
		os.Exit(1)
	}
	flag.Parse()
	if listing() {
		os.Exit(m.Run())
	}
	srv, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "redistest:", err)
		os.Exit(1)
	}
	*s = srv
	code := m.Run()
	(*s).Stop() // the server the tests left there: one may have replaced it
	os.Exit(code)
}
