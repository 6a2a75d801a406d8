package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// CLIInstallHint says how to get redis-cli when it is missing.
const CLIInstallHint = "redis-cli is required by the cluster tests: install it with `apt-get install -y redis-server` (Debian/Ubuntu; it includes redis-cli) or `brew install redis` (macOS), or set REDIS_CLI to its path"

// CLIBinary returns the redis-cli to run: $REDIS_CLI, or redis-cli from PATH.
func CLIBinary() (string, error) {
	if p := os.Getenv("REDIS_CLI"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("redis-cli")
	if err != nil {
		return "", fmt.Errorf("%s (%w)", CLIInstallHint, err)
	}
	return p, nil
}

// clusterConfig is the config of every cluster node. Each node has its own
// directory (see [Start]), so the relative nodes.conf is per node. Full
// coverage is not required, so a test can stop one master and still use the
// slots of the others.
var clusterConfig = []string{
	"cluster-enabled yes",
	"cluster-config-file nodes.conf",
	"cluster-node-timeout 1000",
	"cluster-require-full-coverage no",
}

// Cluster is a running Redis Cluster of masters without replicas.
type Cluster struct {
	nodes  []*Server
	killed []bool
}

// StartCluster runs masters redis-servers in cluster mode on free loopback
// ports, joins them into one cluster with `redis-cli --cluster create` and
// waits until every node reports the cluster ok with all 16384 slots
// assigned. redis-cli needs at least three masters.
func StartCluster(masters int) (*Cluster, error) {
	if masters < 3 {
		return nil, fmt.Errorf("a Redis Cluster needs at least 3 masters, not %d", masters)
	}
	cli, err := CLIBinary()
	if err != nil {
		return nil, err
	}
	c := &Cluster{killed: make([]bool, masters)}
	for range masters {
		s, err := Start(clusterConfig...)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.nodes = append(c.nodes, s)
	}
	if err := c.create(cli); err != nil {
		err = fmt.Errorf("%w\n%s", err, c.logs())
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) create(cli string) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	return c.waitOK(ctx)
}

// waitOK polls CLUSTER INFO on every node that runs until each reports
// the cluster ok, all slots assigned and every node known.
func (c *Cluster) waitOK(ctx context.Context) error {
	want := []string{
		"cluster_state:ok",
		"cluster_slots_assigned:16384",
		fmt.Sprintf("cluster_known_nodes:%d", len(c.nodes)),
	}
	for {
		var bad error
		for i, s := range c.nodes {
			if c.killed[i] {
				continue
			}
			info, err := clusterInfo(ctx, s)
			if err != nil {
				bad = fmt.Errorf("CLUSTER INFO on %s: %w", s.Addr, err)
				break
			}
			if missing := missingLines(info, want); missing != "" {
				bad = fmt.Errorf("node %s does not report %s yet:\n%s", s.Addr, missing, info)
				break
			}
		}
		if bad == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster did not become ok: %w", bad)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func clusterInfo(ctx context.Context, s *Server) (string, error) {
	cl := s.Client()
	defer cl.Close()
	return cl.ClusterInfo(ctx).Result()
}

// missingLines returns the first line of want that info lacks, or "".
func missingLines(info string, want []string) string {
	have := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		have[strings.TrimSpace(sc.Text())] = true
	}
	for _, w := range want {
		if !have[w] {
			return w
		}
	}
	return ""
}

// logs returns every node's log, headed by its address.
func (c *Cluster) logs() string {
	var b strings.Builder
	for _, s := range c.nodes {
		fmt.Fprintf(&b, "--- log of %s ---\n%s", s.Addr, s.log())
	}
	return b.String()
}

// Addrs returns the nodes' host:port addresses; Kill takes an index into it.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.Addr
	}
	return addrs
}

// Client returns a new cluster client of every node; the caller closes it.
func (c *Cluster) Client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
}

// Kill kills node i, as a crash would, leaving the others running. Its
// slots stay assigned to it, so commands on them fail.
func (c *Cluster) Kill(i int) {
	c.nodes[i].kill()
	c.killed[i] = true
}

// Restart kills node i, as a crash would, and starts it again (see
// Start).
func (c *Cluster) Restart(i int) error {
	c.Kill(i)
	return c.Start(i)
}

// Start starts the killed nodes again, each on its port and directory:
// each keeps its nodes.conf, so it rejoins the cluster as the master of
// its slots, but none of its data (no persistence). It returns once every
// node that runs reports the cluster ok.
func (c *Cluster) Start(nodes ...int) error {
	bin, err := Binary()
	if err != nil {
		return err
	}
	for _, i := range nodes {
		_, p, _ := net.SplitHostPort(c.nodes[i].Addr)
		port, _ := strconv.Atoi(p)
		s, err := startOnPort(bin, c.nodes[i].dir, port, clusterConfig)
		if err != nil {
			return err
		}
		c.nodes[i], c.killed[i] = s, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	return c.waitOK(ctx)
}

// Signal sends sig to node i's process, such as SIGSTOP and SIGCONT to
// stall it and let it go on.
func (c *Cluster) Signal(i int, sig os.Signal) error {
	return c.nodes[i].Signal(sig)
}

// Flush empties every running master so a test starts from nothing.
func (c *Cluster) Flush(tb testing.TB) {
	tb.Helper()
	var errs []error
	for i, s := range c.nodes {
		if c.killed[i] {
			continue
		}
		cl := s.Client()
		if err := cl.FlushAll(context.Background()).Err(); err != nil {
			errs = append(errs, fmt.Errorf("FLUSHALL on %s: %w", s.Addr, err))
		}
		cl.Close()
	}
	if err := errors.Join(errs...); err != nil {
		tb.Fatal(err)
	}
}

// Stop kills every node and removes their files.
func (c *Cluster) Stop() {
	for _, s := range c.nodes {
		s.Stop()
	}
}
