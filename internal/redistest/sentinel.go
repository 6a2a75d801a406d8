package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelInstallHint says how to get redis-sentinel when it is missing.
const SentinelInstallHint = "redis-sentinel is required by the Sentinel tests: install it with `apt-get install -y redis-sentinel` (Debian/Ubuntu) or `brew install redis` (macOS), or set REDIS_SENTINEL to its path"

// SentinelBinary returns the redis-sentinel to run: $REDIS_SENTINEL, or
// redis-sentinel from PATH.
func SentinelBinary() (string, error) {
	if p := os.Getenv("REDIS_SENTINEL"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("redis-sentinel")
	if err != nil {
		return "", fmt.Errorf("%s (%w)", SentinelInstallHint, err)
	}
	return p, nil
}

// MasterName is the name the sentinels of [StartSentinel] monitor their
// primary by.
const MasterName = "redistest"

// The Sentinel settings of [StartSentinel], shorter than Redis's defaults
// (30 s, 3 min) so that a test fails a primary over in seconds.
const (
	// SentinelDownAfter is how long a primary does not answer before a
	// sentinel thinks it down (down-after-milliseconds). Not 1 s: a
	// sentinel that has just switched to a new primary may take up to its
	// ping period (1 s) to connect to it, and then needs its PONG, so with
	// 1 s the sentinels often thought a primary they had just promoted down
	// and failed it over again to another replica.
	SentinelDownAfter = 2 * time.Second
	// SentinelFailoverTimeout is failover-timeout: how long a failover may
	// wait for its election and for the promotion, and half the wait before
	// a failed one is tried again.
	SentinelFailoverTimeout = 3 * time.Second
)

// nodeConfig is the config of every data node of [StartSentinel]: a
// primary sends a replica its data as soon as it asks (the default waits
// 5 s for more replicas to share the transfer).
var nodeConfig = []string{"repl-diskless-sync-delay 0"}

// Sentinel is a primary, its replicas and the redis-sentinels that watch
// them, all on loopback.
type Sentinel struct {
	// MasterName is the name the sentinels know the primary by.
	MasterName string

	mu        sync.Mutex
	nodes     []*Server // the data nodes; nodes[0] was the first primary
	killed    []bool
	sentinels []*Server
}

// StartSentinel runs a primary redis-server, replicas redis-servers
// replicating it and sentinels redis-sentinels monitoring it (quorum: a
// majority of them), on free loopback ports, and waits until it is ready
// (see [Sentinel.WaitReady]): a failover can then start at once.
// Failures are detected after [SentinelDownAfter].
func StartSentinel(replicas, sentinels int) (*Sentinel, error) {
	if replicas < 1 || sentinels < 1 {
		return nil, fmt.Errorf("a Sentinel deployment needs a replica and a sentinel at least, not %d and %d", replicas, sentinels)
	}
	sbin, err := SentinelBinary()
	if err != nil {
		return nil, err
	}
	d := &Sentinel{MasterName: MasterName}
	primary, err := Start(nodeConfig...)
	if err != nil {
		return nil, err
	}
	d.add(primary)
	host, port, _ := net.SplitHostPort(primary.Addr)
	for range replicas {
		s, err := Start(append(nodeConfig, "replicaof "+host+" "+port)...)
		if err != nil {
			d.Stop()
			return nil, err
		}
		d.add(s)
	}
	quorum := sentinels/2 + 1
	conf := []string{
		"loglevel notice", // a sentinel logs its events at notice and warning
		fmt.Sprintf("sentinel monitor %s %s %s %d", MasterName, host, port, quorum),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", MasterName, SentinelDownAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s %d", MasterName, SentinelFailoverTimeout.Milliseconds()),
		fmt.Sprintf("sentinel parallel-syncs %s 1", MasterName),
	}
	if err := d.startSentinels(sbin, sentinels, conf); err != nil {
		d.Stop()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := d.WaitReady(ctx); err != nil {
		err = fmt.Errorf("%w\n%s", err, d.Logs())
		d.Stop()
		return nil, err
	}
	return d, nil
}

// startSentinels runs n redis-sentinels with conf, each told of the
// others (known-sentinel, as a sentinel's own config is once it has met
// them), so they need not wait for each other's hello messages (every 2 s)
// before they can agree on a failover.
func (d *Sentinel) startSentinels(bin string, n int, conf []string) error {
	for attempt := 0; ; attempt++ {
		err := d.startSentinelsOnce(bin, n, conf)
		if err == nil || attempt == 4 {
			return err
		}
		for _, s := range d.sentinels {
			s.Stop()
		}
		d.sentinels = nil
	}
}

func (d *Sentinel) startSentinelsOnce(bin string, n int, conf []string) error {
	ports := make([]int, n)
	ids := make([]string, n)
	for i := range n {
		p, err := freePort()
		if err != nil {
			return err
		}
		ports[i] = p
		ids[i] = fmt.Sprintf("%040x", time.Now().UnixNano()+int64(i))
	}
	for i := range n {
		own := append(slices.Clone(conf), "sentinel myid "+ids[i])
		for j := range n {
			if j != i {
				own = append(own, fmt.Sprintf("sentinel known-sentinel %s 127.0.0.1 %d %s", d.MasterName, ports[j], ids[j]))
			}
		}
		dir, err := os.MkdirTemp("", "redistest-")
		if err != nil {
			return err
		}
		s, err := startOnPort(bin, dir, ports[i], own)
		if err != nil {
			os.RemoveAll(dir)
			return err
		}
		d.sentinels = append(d.sentinels, s)
	}
	return nil
}

func (d *Sentinel) add(s *Server) {
	d.nodes = append(d.nodes, s)
	d.killed = append(d.killed, false)
}

// SentinelAddrs returns the sentinels' host:port addresses.
func (d *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(d.sentinels))
	for i, s := range d.sentinels {
		addrs[i] = s.Addr
	}
	return addrs
}

// Addrs returns the data nodes' host:port addresses, the first primary's
// first.
func (d *Sentinel) Addrs() []string {
	addrs := make([]string, len(d.nodes))
	for i, s := range d.nodes {
		addrs[i] = s.Addr
	}
	return addrs
}

// FailoverOptions returns the options of a failover client of the
// deployment, without any other setting.
func (d *Sentinel) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{MasterName: d.MasterName, SentinelAddrs: d.SentinelAddrs()}
}

// Client returns a new failover client of the deployment; the caller
// closes it.
func (d *Sentinel) Client() *redis.Client {
	return redis.NewFailoverClient(d.FailoverOptions())
}

// live returns the data nodes that were not killed.
func (d *Sentinel) live() []*Server {
	d.mu.Lock()
	defer d.mu.Unlock()
	var live []*Server
	for i, s := range d.nodes {
		if !d.killed[i] {
			live = append(live, s)
		}
	}
	return live
}

// Primary returns the address of the primary that every sentinel reports,
// or an error if they do not agree.
func (d *Sentinel) Primary(ctx context.Context) (string, error) {
	var agreed string
	for _, s := range d.sentinels {
		addr, err := d.primaryOf(ctx, s)
		if err != nil {
			return "", err
		}
		if agreed != "" && addr != agreed {
			return "", fmt.Errorf("sentinels disagree on the primary: %s and %s", agreed, addr)
		}
		agreed = addr
	}
	return agreed, nil
}

func (d *Sentinel) primaryOf(ctx context.Context, s *Server) (string, error) {
	sc := sentinelClient(s.Addr)
	defer sc.Close()
	hp, err := sc.GetMasterAddrByName(ctx, d.MasterName).Result()
	if err != nil {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME on %s: %w", s.Addr, err)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

func sentinelClient(addr string) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 5 * time.Second})
}

// WaitReady waits until every sentinel agrees on the primary, sees it up,
// knows the other sentinels and sees every replica that was not killed up
// and in sync with it, and every such replica reports its link to the
// primary up: a failover may start and has a replica to promote.
func (d *Sentinel) WaitReady(ctx context.Context) error {
	for {
		err := d.ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the Sentinel deployment did not become ready: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ready returns nil when the deployment is ready, or what it lacks.
func (d *Sentinel) ready(ctx context.Context) error {
	primary, err := d.Primary(ctx)
	if err != nil {
		return err
	}
	var replicas []string
	found := false
	for _, s := range d.live() {
		if s.Addr == primary {
			found = true
			continue
		}
		replicas = append(replicas, s.Addr)
	}
	if !found {
		return fmt.Errorf("the sentinels' primary %s is not a running node of %v", primary, d.Addrs())
	}
	if role, err := infoField(ctx, primary, "role"); err != nil || role != "master" {
		return fmt.Errorf("primary %s reports role %q (%v)", primary, role, err)
	}
	for _, addr := range replicas {
		if link, err := infoField(ctx, addr, "master_link_status"); err != nil || link != "up" {
			return fmt.Errorf("replica %s reports its link %q (%v)", addr, link, err)
		}
	}
	for _, s := range d.sentinels {
		if err := d.sentinelReady(ctx, s, primary, replicas); err != nil {
			return err
		}
	}
	return nil
}

// sentinelReady returns nil when sentinel s sees primary up, the other
// sentinels, and each of replicas up and replicating primary.
func (d *Sentinel) sentinelReady(ctx context.Context, s *Server, primary string, replicas []string) error {
	sc := sentinelClient(s.Addr)
	defer sc.Close()
	m, err := sc.Master(ctx, d.MasterName).Result()
	if err != nil {
		return fmt.Errorf("SENTINEL MASTER on %s: %w", s.Addr, err)
	}
	if m["flags"] != "master" {
		return fmt.Errorf("sentinel %s sees the primary with flags %q", s.Addr, m["flags"])
	}
	if want := strconv.Itoa(len(d.sentinels) - 1); m["num-other-sentinels"] != want {
		return fmt.Errorf("sentinel %s knows %s other sentinels, not %s", s.Addr, m["num-other-sentinels"], want)
	}
	seen, err := sc.Replicas(ctx, d.MasterName).Result()
	if err != nil {
		return fmt.Errorf("SENTINEL REPLICAS on %s: %w", s.Addr, err)
	}
	for _, addr := range replicas {
		var r map[string]string
		for _, c := range seen {
			if net.JoinHostPort(c["ip"], c["port"]) == addr {
				r = c
			}
		}
		switch {
		case r == nil:
			return fmt.Errorf("sentinel %s does not know replica %s yet", s.Addr, addr)
		case r["flags"] != "slave":
			return fmt.Errorf("sentinel %s sees replica %s with flags %q", s.Addr, addr, r["flags"])
		case r["master-link-status"] != "ok" || net.JoinHostPort(r["master-host"], r["master-port"]) != primary:
			return fmt.Errorf("sentinel %s sees replica %s replicating %s:%s, link %s", s.Addr, addr, r["master-host"], r["master-port"], r["master-link-status"])
		}
	}
	return nil
}

// infoField returns field of INFO replication on the node at addr.
func infoField(ctx context.Context, addr, field string) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 5 * time.Second})
	defer c.Close()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("no %s in INFO replication of %s", field, addr)
}

// Role returns the role the node at addr reports: "master" or "slave".
func Role(ctx context.Context, addr string) (string, error) {
	return infoField(ctx, addr, "role")
}

// KillPrimary kills the primary the sentinels agree on, as a crash would,
// and returns its address once the process has exited.
func (d *Sentinel) KillPrimary(ctx context.Context) (string, error) {
	primary, err := d.Primary(ctx)
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, s := range d.nodes {
		if s.Addr == primary && !d.killed[i] {
			s.kill()
			d.killed[i] = true
			return primary, nil
		}
	}
	return "", fmt.Errorf("primary %s is not a running node of the deployment", primary)
}

// Failover asks a sentinel to fail the primary over to a replica now
// (SENTINEL FAILOVER), as an operator would, and returns the primary's
// address once the sentinel has started the failover: the old primary
// keeps serving until the replica is promoted and, for clients that
// follow the sentinels, until they learn of it. A sentinel that refuses
// because a failover is in progress or no replica is ready is asked again
// until ctx ends.
func (d *Sentinel) Failover(ctx context.Context) (string, error) {
	primary, err := d.Primary(ctx)
	if err != nil {
		return "", err
	}
	sc := sentinelClient(d.sentinels[0].Addr)
	defer sc.Close()
	for {
		err := sc.Failover(ctx, d.MasterName).Err()
		if err == nil {
			return primary, nil
		}
		if !strings.HasPrefix(err.Error(), "INPROG") && !strings.HasPrefix(err.Error(), "NOGOODSLAVE") {
			return "", fmt.Errorf("SENTINEL FAILOVER: %w", err)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("SENTINEL FAILOVER: %w (last refusal: %w)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitPrimary waits until every sentinel reports a primary other than old
// and that node reports itself a primary, and returns its address.
func (d *Sentinel) WaitPrimary(ctx context.Context, old string) (string, error) {
	for {
		addr, err := d.Primary(ctx)
		if err == nil && addr == old {
			err = errors.New("the sentinels still report the old primary")
		}
		if err == nil {
			var role string
			if role, err = Role(ctx, addr); err == nil && role != "master" {
				err = fmt.Errorf("%s reports role %s", addr, role)
			}
		}
		if err == nil {
			return addr, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no new primary: %w (%w)", ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Logs returns every node's and sentinel's log, headed by its address.
func (d *Sentinel) Logs() string {
	var b strings.Builder
	for _, s := range d.nodes {
		fmt.Fprintf(&b, "--- log of redis-server %s ---\n%s", s.Addr, s.log())
	}
	for _, s := range d.sentinels {
		fmt.Fprintf(&b, "--- log of redis-sentinel %s ---\n%s", s.Addr, s.log())
	}
	return b.String()
}

// Stop kills every sentinel and node and removes their files.
func (d *Sentinel) Stop() {
	for _, s := range d.sentinels {
		s.Stop()
	}
	for _, s := range d.nodes {
		s.Stop()
	}
}

// WaitSynced waits until every replica that was not killed has replicated
// everything the primary had written when it began waiting (its
// slave_repl_offset reaches the primary's master_repl_offset): a primary
// killed after that loses none of those writes. Call it after WaitReady,
// while nothing writes.
func (d *Sentinel) WaitSynced(ctx context.Context) error {
	primary, err := d.Primary(ctx)
	if err != nil {
		return err
	}
	want, err := infoOffset(ctx, primary, "master_repl_offset")
	if err != nil {
		return err
	}
	for _, s := range d.live() {
		if s.Addr == primary {
			continue
		}
		for {
			got, err := infoOffset(ctx, s.Addr, "slave_repl_offset")
			if err == nil && got >= want {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("replica %s did not reach the primary's offset %d: %w (last: %d, %v)", s.Addr, want, ctx.Err(), got, err)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}

// infoOffset returns the replication offset field of the node at addr.
func infoOffset(ctx context.Context, addr, field string) (int64, error) {
	v, err := infoField(ctx, addr, field)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}
