package redislimit

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimitgen/ratelimitgen/runtime/guard"
)

// The fence: a client that dials a connection to another server than its
// last one (a failover's new primary) may have reached a state that lacks
// some of the process's writes. From the dial until each limiter of the
// client has checked its mark there and charged back what Redis lost
// ([guard.Fallback.CheckMarks]), the client's commands wait, so that Redis
// decides no call on a state that lacks what the process admitted: only
// the commands already inside the client when it dialed go on. Then they
// wait until every process of the fleet has done the same
// ([guard.Fallback.AwaitFleet]), so that none decides on the new server
// while another still charges the old one. A server that restarted where
// it was is found by the probe that closes the breaker, or by the next
// mark. A command in flight when the client moved that fails as an
// unreachable server does (it was sent to the server the client left) is
// shed ([ratelimit.ErrBusy]): it says nothing of the server the client
// uses now, so it counts toward no breaker.

// fence is a client's fence: one hook on the client, and the fallbacks of
// the limiters that use it.
type fence struct {
	// up is the channel of the fence that is up, closed when it drops;
	// nil while none is.
	up atomic.Pointer[chan struct{}]
	// again is set by a dial while the fence is up: it checks once more.
	again atomic.Bool
	// server is the address of the server last dialled; moves counts the
	// dials to another server than the last.
	server atomic.Pointer[string]
	moves  atomic.Int64
	// unseen is set when the client had connections before the fence
	// hooked it: the server they reach is unknown, so the first dial the
	// fence sees counts as a move.
	unseen atomic.Bool
	mu     sync.Mutex
	joins  map[*guard.Fallback]int
}

// fenceTimeout bounds how long a fence stays up: a Redis that does not
// answer its marks by then, or a fleet that has not all come over, is
// left to the calls and their breaker.
const fenceTimeout = 2 * time.Second

// fences holds the fence of each client that has one.
var fences sync.Map // *redis.Client → *fence

// hookFence returns the fence of client, hooking the client the first
// time. It runs before the guards start, so that the fence sees the
// heartbeat's first dial; a client that had connections already (used
// before [New]) reaches a server the fence did not see dialled, so its
// first dial counts as a move.
func hookFence(client *redis.Client) *fence {
	v, loaded := fences.LoadOrStore(client, &fence{joins: map[*guard.Fallback]int{}})
	f := v.(*fence)
	if !loaded {
		f.unseen.Store(client.PoolStats().TotalConns > 0)
		client.AddHook(f)
	}
	return f
}

// join adds fallback to the fence; the returned func takes it out again.
func (f *fence) join(fallback *guard.Fallback) (leave func()) {
	f.mu.Lock()
	f.joins[fallback]++
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.joins[fallback]--; f.joins[fallback] <= 0 {
			delete(f.joins, fallback)
		}
	}
}

// DialHook raises the fence after the client dialled another server than
// the one it dialled last.
func (f *fence) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err == nil && f.moved(conn.RemoteAddr().String()) {
			f.moves.Add(1)
			f.raise()
		}
		return conn, err
	}
}

// moved notes server as the one last dialled, and reports whether another
// was before it (or, for the first dial, whether the client's earlier
// connections reach a server the fence did not see: unseen).
func (f *fence) moved(server string) bool {
	last := f.server.Swap(&server)
	if last == nil {
		return f.unseen.Swap(false)
	}
	return *last != server
}

// ProcessHook holds a command while the fence is up.
func (f *fence) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := f.wait(ctx); err != nil {
			cmd.SetErr(err)
			return err
		}
		moves := f.moves.Load()
		err := next(ctx, cmd)
		if f.left(moves, err) {
			err = movedError(err)
			cmd.SetErr(err)
		}
		return err
	}
}

// left reports whether a command that failed with err was in flight when
// the client moved to another server (moves was the count of moves when
// it was sent), and failed as a server that cannot be reached does.
func (f *fence) left(moves int64, err error) bool {
	return err != nil && f.moves.Load() != moves && redisUnavailable(err)
}

// movedError marks err, the failure of a command sent to the server the
// client left, as a call the client could not send: shed, and counted
// toward no breaker.
func movedError(err error) error {
	return busyError{fmt.Errorf("redislimit: the client moved to another server while the call ran: %w", err)}
}

// ProcessPipelineHook holds a pipeline while the fence is up.
func (f *fence) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := f.wait(ctx); err != nil {
			for _, cmd := range cmds {
				cmd.SetErr(err)
			}
			return err
		}
		moves := f.moves.Load()
		err := next(ctx, cmds)
		if f.left(moves, err) {
			err = movedError(err)
			for _, cmd := range cmds {
				if cmd.Err() != nil {
					cmd.SetErr(movedError(cmd.Err()))
				}
			}
		}
		return err
	}
}

// wait waits until no fence is up, unless ctx is the guards' own work
// (guard.IsBackground: the fence's checks, the heartbeat's marks, the
// carry-backs it may wait for), or ctx ends first (its error).
func (f *fence) wait(ctx context.Context) error {
	up := f.up.Load()
	if up == nil || guard.IsBackground(ctx) {
		return nil
	}
	select {
	case <-*up:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// raise puts the fence up, unless it is up already (then it checks once
// more before it drops), and checks the marks on a goroutine of its own.
func (f *fence) raise() {
	f.again.Store(true)
	up := make(chan struct{})
	if !f.up.CompareAndSwap(nil, &up) {
		return
	}
	go func() {
		since := time.Now().Add(-guard.HeartbeatTTL)
		ctx, cancel := context.WithTimeout(context.Background(), fenceTimeout)
		defer cancel()
		checked := make(chan struct{})
		go func() {
			defer close(checked)
			for f.again.Swap(false) {
				f.check(ctx)
			}
			for _, fallback := range f.fallbacks() {
				fallback.AwaitFleet(ctx, since)
			}
		}()
		// At most fenceTimeout, though a check waits on a command stuck
		// on the server the client left (the heartbeat's mark, until its
		// read timeout), which no context ends.
		select {
		case <-checked:
		case <-ctx.Done():
		}
		f.up.Store(nil)
		close(up)
		if f.again.Load() {
			f.raise() // a dial after the last check
		}
	}()
}

// check checks each joined fallback's marks, trying again every 10 ms
// while Redis does not answer, until ctx ends.
func (f *fence) check(ctx context.Context) {
	for _, fallback := range f.fallbacks() {
		for {
			_, err := fallback.CheckMarks(ctx)
			if err == nil || ctx.Err() != nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// fallbacks returns the fallbacks joined.
func (f *fence) fallbacks() []*guard.Fallback {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*guard.Fallback, 0, len(f.joins))
	for fb := range f.joins {
		out = append(out, fb)
	}
	return out
}
