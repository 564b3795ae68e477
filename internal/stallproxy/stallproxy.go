// Package stallproxy is a TCP proxy for tests that stops relaying on
// request: the peer behind it then looks like one that stopped reading.
package stallproxy

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy relays TCP connections to a target, until Stall is
// called: from then on it reads nothing more from the dialler, a peer
// that stops reading, while it still relays what the target sends.
type Proxy struct {
	ln      net.Listener
	stalled chan struct{}
	once    sync.Once
	mu      sync.Mutex
	conns   []net.Conn
	relays  sync.WaitGroup
}

// New starts a proxy to target, closed when the test ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, stalled: make(chan struct{})}
	p.relays.Add(1)
	go func() {
		defer p.relays.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			in.(*net.TCPConn).SetReadBuffer(16 << 10) // so that the dialler's writes block soon
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			p.relays.Add(2)
			go func() {
				defer p.relays.Done()
				io.Copy(in, out)
			}()
			go func() {
				defer p.relays.Done()
				p.relayUntilStalled(out, in)
			}()
		}
	}()
	t.Cleanup(p.Close)
	return p
}

func (p *Proxy) relayUntilStalled(dst, src net.Conn) {
	buf := make([]byte, 4096)
	for {
		select {
		case <-p.stalled:
			return
		default:
		}
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Close closes every connection the proxy holds and waits for its relays.
func (p *Proxy) Close() {
	p.Stall()
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.relays.Wait()
}

// Stall stops the relaying from the diallers: the proxy reads nothing
// more from them, while it still relays what the target sends.
func (p *Proxy) Stall() { p.once.Do(func() { close(p.stalled) }) }

// Port is the proxy's port on 127.0.0.1.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }
