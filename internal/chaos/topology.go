package chaos

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/internal/redistest"
)

// standalone is one redis-server, which the workers reach through a
// proxy that can delay their traffic.
type standalone struct {
	srv   *redistest.Server
	addr  string
	proxy *proxy
}

func startStandalone() (*standalone, error) {
	s, err := redistest.Start()
	if err != nil {
		return nil, err
	}
	p, err := startProxy(s.Addr)
	if err != nil {
		s.Stop()
		return nil, err
	}
	return &standalone{srv: s, addr: s.Addr, proxy: p}, nil
}

func (s *standalone) endpoint() endpoint {
	return endpoint{Kind: "standalone", Addrs: []string{s.proxy.Addr()}}
}

// direct says how a worker's client reaches the server itself, without
// the proxy, whose copies would cost a hot line's calls more than Redis.
func (s *standalone) direct() endpoint {
	return endpoint{Kind: "standalone", Addrs: []string{s.addr}}
}

func (s *standalone) ready(context.Context) error { return nil }

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
		// 20ms each way, 40ms a round trip: slower, within the clients'
		// 100ms timeouts, so Redis decides throughout.
		s.delay("delay 20ms", 20*time.Millisecond, false),
		// 200ms each way: every call times out (perhaps after Redis ran
		// it), the breakers open, and their probes time out too.
		s.delay("delay 200ms", 200*time.Millisecond, true),
	}
}

// delay is the fault of a network that delays each packet by d.
func (s *standalone) delay(name string, d time.Duration, outage bool) fault {
	return fault{name: name, outage: outage,
		inject: func(context.Context) error { s.proxy.setDelay(d); return nil },
		heal:   func(context.Context) error { s.proxy.setDelay(0); return nil }}
}

func (s *standalone) stop() {
	s.proxy.close()
	if s.srv != nil {
		_ = s.srv.Signal(syscall.SIGCONT)
		_ = s.admin(context.Background(), "CLIENT", "UNPAUSE")
		s.srv.Stop()
	}
}

// sentinel is a primary, two replicas and three sentinels: a killed
// primary does not come back, and a hot run kills one per algorithm, each
// time with a replica left to promote.
type sentinel struct {
	d    *redistest.Sentinel
	logf func(string, ...any)
}

func startSentinel(_ context.Context, logf func(string, ...any)) (*sentinel, error) {
	d, err := redistest.StartSentinel(2, 3)
	if err != nil {
		return nil, err
	}
	return &sentinel{d: d, logf: logf}, nil
}

func (s *sentinel) endpoint() endpoint {
	o := s.d.FailoverOptions()
	return endpoint{Kind: "sentinel", Addrs: o.SentinelAddrs, Master: o.MasterName}
}

// ready waits until the sentinels agree on a primary, every replica's link
// to it is up and the sentinels see it so (as after a failover, when the
// sentinels turn the old primary into a replica, which can take them
// seconds), and each replica has every write the primary had when it
// started waiting: a failover then loses nothing written before the fault.
func (s *sentinel) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	began := time.Now()
	if err := s.d.WaitReady(ctx); err != nil {
		return err
	}
	linked := time.Since(began)
	if err := s.d.WaitSynced(ctx); err != nil {
		return err
	}
	s.logf("sentinel: replicas linked after %s, in sync after %s", linked.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	return nil
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

func (c *cluster) endpoint() endpoint {
	return endpoint{Kind: "cluster", Addrs: c.c.Addrs()}
}

// ready returns at once: a killed master does not come back.
func (c *cluster) ready(context.Context) error { return nil }

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
		// Each master forgets what it held, as each would restarting
		// empty, answering all the while.
		{name: "FLUSHALL", inject: c.flushAll, heal: func(context.Context) error { return nil }},
		// The faults of every master at once, whichever holds a line.
		{name: "SIGSTOP", outage: true,
			inject: func(context.Context) error { return c.signalAll(syscall.SIGSTOP) },
			heal:   func(context.Context) error { return c.signalAll(syscall.SIGCONT) }},
		{name: "kill+restart", outage: true,
			inject: func(context.Context) error {
				for i := range c.c.Addrs() {
					c.c.Kill(i)
				}
				return nil
			},
			heal: func(context.Context) error { return c.c.Start(c.all()...) }},
	}
}

// all returns the indices of the masters.
func (c *cluster) all() []int {
	idx := make([]int, len(c.c.Addrs()))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// signalAll sends sig to each master that runs.
func (c *cluster) signalAll(sig os.Signal) error {
	var errs []error
	for i := range c.all() {
		if err := c.c.Signal(i, sig); !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// flushAll runs FLUSHALL on each master.
func (c *cluster) flushAll(ctx context.Context) error {
	client := c.c.Client()
	defer client.Close()
	return client.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.FlushAll(ctx).Err() })
}

func (c *cluster) stop() {
	_ = c.signalAll(syscall.SIGCONT)
	c.c.Stop()
}
