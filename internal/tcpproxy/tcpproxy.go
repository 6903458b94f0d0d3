// Package tcpproxy is a loopback TCP proxy that tests put between a sink and
// its broker to cut, stall or refuse connections at chosen moments: the
// cleanest way to lose a connection mid-write without stopping a server other
// tests share.
package tcpproxy

import (
	"net"
	"sync"
	"testing"
)

// A Proxy forwards every connection accepted on 127.0.0.1 to a target
// address.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	conns   map[*pair]struct{}
	blocked bool
	stalled bool
	resume  chan struct{} // closed when a stall ends
	wg      sync.WaitGroup
	closed  bool
}

type pair struct{ client, server net.Conn }

func (p *pair) close() {
	p.client.Close()
	p.server.Close()
}

// Start starts a proxy to target and closes it when the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatalf("tcpproxy: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// New listens on a free loopback port and forwards to target.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[*pair]struct{}{}, resume: make(chan struct{})}
	close(p.resume)
	p.wg.Go(p.accept)
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port returns the proxy's port.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		blocked := p.blocked || p.closed
		p.mu.Unlock()
		if blocked {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		pr := &pair{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			pr.close()
			return
		}
		p.conns[pr] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(pr, c, s) })
		p.wg.Go(func() { p.pipe(pr, s, c) })
	}
}

// pipe copies src to dst, pausing while the proxy is stalled, and closes
// both ends when either side ends.
func (p *Proxy) pipe(pr *pair, dst, src net.Conn) {
	defer func() {
		pr.close()
		p.mu.Lock()
		delete(p.conns, pr)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			resume := p.resume
			p.mu.Unlock()
			<-resume // a stall holds what was read; Cut ends it
			p.mu.Lock()
			_, live := p.conns[pr]
			p.mu.Unlock()
			if !live {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Cut closes every open connection; new ones are still forwarded unless
// the proxy is blocked.
func (p *Proxy) Cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[*pair]struct{}{}
	if p.stalled {
		// Release the stalled copiers: they see their pair gone and stop.
		close(p.resume)
		p.resume = make(chan struct{})
	}
	p.mu.Unlock()
	for c := range conns {
		c.close()
	}
}

// Block cuts every connection and refuses new ones (accepting and closing
// them at once) until Resume: the broker looks down.
func (p *Proxy) Block() {
	p.mu.Lock()
	p.blocked = true
	p.mu.Unlock()
	p.Cut()
}

// Stall stops forwarding bytes in both directions without closing
// anything: requests sent now get no answer (a hung broker, or a network
// that drops packets), until Resume or Cut.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stalled {
		p.stalled = true
		p.resume = make(chan struct{})
	}
}

// Resume ends a block or a stall.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = false
	if p.stalled {
		p.stalled = false
		close(p.resume)
	}
}

// Connections returns the number of open connections.
func (p *Proxy) Connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Resume()
	p.Cut()
	p.wg.Wait()
}
