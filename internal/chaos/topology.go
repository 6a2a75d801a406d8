package chaos

import (
	"context"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
	"github.com/ratelimitgen/ratelimitgen/runtime/redislimit"
)

// standalone is one redis-server.
type standalone struct {
	srv  *redistest.Server
	addr string
}

func startStandalone() (*standalone, error) {
	s, err := redistest.Start()
	if err != nil {
		return nil, err
	}
	return &standalone{srv: s, addr: s.Addr}, nil
}

func (s *standalone) client() redis.UniversalClient {
	return redis.NewClient(redislimit.ClientOptions(&redis.Options{Addr: s.addr}))
}

// admin runs one command on the server with a client of its own.
func (s *standalone) admin(ctx context.Context, args ...any) error {
	c := redis.NewClient(&redis.Options{Addr: s.addr, ReadTimeout: 10 * time.Second})
	defer c.Close()
	return c.Do(ctx, args...).Err()
}

func (s *standalone) faults() []fault {
	none := func(context.Context) error { return nil }
	return []fault{
		{name: "kill+restart", outage: true,
			inject: func(context.Context) error { s.srv.Stop(); s.srv = nil; return nil },
			heal: func(context.Context) error {
				srv, err := redistest.StartOn(s.addr)
				s.srv = srv
				return err
			}},
		{name: "SIGSTOP", outage: true,
			inject: func(context.Context) error { return s.srv.Signal(syscall.SIGSTOP) },
			heal:   func(context.Context) error { return s.srv.Signal(syscall.SIGCONT) }},
		{name: "CLIENT PAUSE", outage: true,
			// WRITE pauses the limiters' scripts (they write) but not the
			// connection handshake of the client that unpauses.
			inject: func(ctx context.Context) error {
				return s.admin(ctx, "CLIENT", "PAUSE", time.Minute.Milliseconds(), "WRITE")
			},
			heal: func(ctx context.Context) error { return s.admin(ctx, "CLIENT", "UNPAUSE") }},
		{name: "FLUSHALL",
			inject: func(ctx context.Context) error { return s.admin(ctx, "FLUSHALL") },
			heal:   none},
	}
}

func (s *standalone) stop() {
	if s.srv != nil {
		_ = s.srv.Signal(syscall.SIGCONT)
		_ = s.admin(context.Background(), "CLIENT", "UNPAUSE")
		s.srv.Stop()
	}
}

// sentinel is a primary, a replica and three sentinels.
type sentinel struct {
	d *redistest.Sentinel
}

func startSentinel(context.Context) (*sentinel, error) {
	d, err := redistest.StartSentinel(1, 3)
	if err != nil {
		return nil, err
	}
	return &sentinel{d: d}, nil
}

func (s *sentinel) client() redis.UniversalClient {
	return redis.NewFailoverClient(redislimit.FailoverOptions(s.d.FailoverOptions()))
}

func (s *sentinel) faults() []fault {
	var old string
	wait := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_, err := s.d.WaitPrimary(ctx, old)
		return err
	}
	return []fault{
		{name: "SENTINEL FAILOVER", outage: true,
			inject: func(ctx context.Context) (err error) { old, err = s.d.Failover(ctx); return err },
			heal:   wait},
		{name: "primary killed", outage: true,
			inject: func(ctx context.Context) (err error) { old, err = s.d.KillPrimary(ctx); return err },
			heal:   wait},
	}
}

func (s *sentinel) stop() { s.d.Stop() }

// cluster is three masters without replicas.
type cluster struct {
	c *redistest.Cluster
}

func startCluster() (*cluster, error) {
	c, err := redistest.StartCluster(3)
	if err != nil {
		return nil, err
	}
	return &cluster{c: c}, nil
}

func (c *cluster) client() redis.UniversalClient {
	return redis.NewClusterClient(redislimit.ClusterOptions(&redis.ClusterOptions{Addrs: c.c.Addrs()}))
}

func (c *cluster) faults() []fault {
	return []fault{
		{name: "master SIGSTOP", outage: true,
			inject: func(context.Context) error { return c.c.Signal(0, syscall.SIGSTOP) },
			heal:   func(context.Context) error { return c.c.Signal(0, syscall.SIGCONT) }},
		// Without replicas a killed master does not come back: the calls
		// whose keys it held are decided by the fallbacks to the end.
		{name: "master killed", outage: false,
			inject: func(context.Context) error { c.c.Kill(0); return nil },
			heal:   func(context.Context) error { return nil }},
	}
}

func (c *cluster) stop() {
	_ = c.c.Signal(0, syscall.SIGCONT)
	c.c.Stop()
}
