package chaos

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// proxy forwards TCP connections on loopback to a server, adding a delay
// that can be changed at any time to every chunk of bytes in each
// direction: network latency without tc netem (which needs the sch_netem
// kernel module and CAP_NET_ADMIN). A chunk is held until the delay after
// it was read has passed, so the delay adds latency, not a bandwidth limit,
// and bytes keep their order. A connection whose server cannot be dialled
// is closed at once, as a dead server's would be refused.
type proxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // ns

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// startProxy starts a proxy to target on a free loopback port.
func startProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr returns the address clients dial.
func (p *proxy) Addr() string { return p.ln.Addr().String() }

// setDelay makes every chunk forwarded from now on wait d in each
// direction (so a round trip takes 2d more).
func (p *proxy) setDelay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// serve forwards c to a new connection to the target until either side
// ends.
func (p *proxy) serve(c net.Conn) {
	s, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, s) {
		return
	}
	defer p.untrack(c, s)
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(s, c) })
	wg.Go(func() { p.pipe(c, s) })
	wg.Wait()
}

// track remembers c and s, to close them when the proxy closes; it closes
// them and returns false when it already did.
func (p *proxy) track(c, s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		c.Close()
		s.Close()
		return false
	}
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	return true
}

func (p *proxy) untrack(c, s net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns != nil {
		delete(p.conns, c)
		delete(p.conns, s)
	}
}

// chunk is bytes read, and when they may be written.
type chunk struct {
	b   []byte
	due time.Time
}

// pipe copies from src to dst, each chunk after the delay, and closes
// both when either fails.
func (p *proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	chunks := make(chan chunk, 1024)
	go func() {
		defer close(chunks)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				chunks <- chunk{b: b[:n], due: time.Now().Add(time.Duration(p.delay.Load()))}
			}
			if err != nil {
				return
			}
		}
	}()
	for ch := range chunks {
		if d := time.Until(ch.due); d > 0 {
			time.Sleep(d)
		}
		if _, err := dst.Write(ch.b); err != nil {
			src.Close()
			for range chunks { // let the reader end
			}
			return
		}
	}
}

// close stops accepting, closes every connection and waits for their
// goroutines.
func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}
