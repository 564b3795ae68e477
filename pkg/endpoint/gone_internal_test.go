package endpoint

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// TestWriteOnLostConnectionIsPeerGone: a write that races the end of its
// connection's session (a TCP reset, as when the peer's process is
// killed) fails with the error that ended the session, "read: connection
// reset by peer", which go-yamux hands out before it resets the session's
// streams. The Send then fails with ErrPeerGone, as for the stream's own
// reset, rather than with that error alone, which matched nothing the
// caller could test (in a run, 1 in 40 Sends racing a reset got it).
// Which error a racing write gets is a matter of scheduling, so the test
// gives the sender's error classification such an error, for the stream
// the Send wrote to on a connection reset under it.
func TestWriteOnLostConnectionIsPeerGone(t *testing.T) {
	a, b := testutil.NewNode(t), testutil.NewNode(t)
	sa, err := New(a)
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	sb, err := New(b)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	got := make(chan struct{}, 1)
	if err := sb.Register("chat", "", ListenerFunc(func(context.Context, *Delivery) { got <- struct{}{} })); err != nil {
		t.Fatal(err)
	}
	p := newResetProxy(t, b.Host().Addrs()[0])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: []ma.Multiaddr{p.addr(t)}}); err != nil {
		t.Fatal(err)
	}
	if err := sa.Send(ctx, PeerAddress(b.ID(), "chat", ""), message.New(message.Text("", "t", "x"))); err != nil {
		t.Fatal(err)
	}
	<-got // the stream stays open: Flush would end it
	sa.mu.Lock()
	snd := sa.senders[b.ID()]
	sa.mu.Unlock()
	snd.mu.Lock()
	st := snd.st
	snd.mu.Unlock()
	if st == nil {
		t.Fatal("no stream to the peer after a Send")
	}
	p.reset()
	for !st.Conn().IsClosed() {
		if ctx.Err() != nil {
			t.Fatal("the connection did not end after its reset")
		}
		time.Sleep(time.Millisecond)
	}
	// What the session hands such a write: the error its reader got from
	// the connection, here a real one, read on a loopback connection that
	// its other end reset.
	lost := connReset(t)
	t.Logf("the lost connection's error: %v", lost)
	snd.mu.Lock()
	err = snd.writeErrLocked(ctx, nil, st, lost)
	snd.mu.Unlock()
	if !errors.Is(err, ErrPeerGone) {
		t.Fatalf("a write failing with the lost connection's error (%v): %v, want ErrPeerGone", lost, err)
	}
}

// connReset returns the error a read gets on a loopback TCP connection
// whose other end reset it.
func connReset(t *testing.T) error {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	s.(*net.TCPConn).SetLinger(0)
	s.Close()
	_, err = c.Read(make([]byte, 1))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Skipf("a read on a reset connection: %v", err)
	}
	return err
}

// resetProxy forwards TCP connections on loopback to a node's address,
// and reset aborts them with a TCP reset: a connection lost as when the
// peer's process is killed with bytes it has not read.
type resetProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []*net.TCPConn
	wg    sync.WaitGroup
}

func newResetProxy(t *testing.T, to ma.Multiaddr) *resetProxy {
	t.Helper()
	_, target, err := manet.DialArgs(to)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &resetProxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("tcp4", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c.(*net.TCPConn), d.(*net.TCPConn))
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); io.Copy(d, c); d.Close() }()
			go func() { defer p.wg.Done(); io.Copy(c, d); c.Close() }()
		}
	}()
	t.Cleanup(func() { p.reset(); p.wg.Wait() })
	return p
}

func (p *resetProxy) addr(t *testing.T) ma.Multiaddr {
	t.Helper()
	a, err := manet.FromNetAddr(p.ln.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// reset stops accepting and aborts every connection with a reset.
func (p *resetProxy) reset() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.SetLinger(0)
		c.Close()
	}
}
