package node_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"math"
	"net"
	"sync"
	"testing"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
	yamux "github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// yamux frame types and flags (go-yamux's spec.md).
const (
	frameData, frameWindow, framePing, frameGoAway = 0, 1, 2, 3
	flagSYN, flagACK, flagFIN, flagRST             = 1, 2, 4, 8
)

// rawFrame encodes a yamux frame: header, then body.
func rawFrame(typ byte, flags uint16, id, length uint32, body []byte) []byte {
	b := make([]byte, 12, 12+len(body))
	b[1] = typ
	binary.BigEndian.PutUint16(b[2:4], flags)
	binary.BigEndian.PutUint32(b[4:8], id)
	binary.BigEndian.PutUint32(b[8:12], length)
	return append(b, body...)
}

// tamperConn is a hostile peer's secure connection under its yamux: the
// test writes raw frames between yamux's own (go-yamux writes each frame
// with one Write), and reads what the node sends on the streams the test
// opened that way (IDs from rawID up), their RSTs and GoAways.
type tamperConn struct {
	net.Conn

	wmu sync.Mutex

	mu      sync.Mutex
	hdr     []byte
	body    uint32 // body bytes left of the frame being read
	bodyID  uint32
	data    map[uint32][]byte
	resets  map[uint32]bool
	goAways []uint32
}

// rawID is the first stream ID the test opens by hand: far above the
// hostile yamux's own (odd, from 1, one per stream it opens).
const rawID = 1<<20 + 1

func (c *tamperConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.Conn.Write(p)
}

// inject writes frames, each in one Write, none inside one of yamux's.
func (c *tamperConn) inject(frames ...[]byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for _, f := range frames {
		if _, err := c.Conn.Write(f); err != nil {
			return err
		}
	}
	return nil
}

func (c *tamperConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	for b := p[:n]; len(b) > 0; {
		if c.body > 0 {
			k := min(uint32(len(b)), c.body)
			if c.bodyID >= rawID {
				c.data[c.bodyID] = append(c.data[c.bodyID], b[:k]...)
			}
			c.body -= k
			b = b[k:]
			continue
		}
		k := min(12-len(c.hdr), len(b))
		c.hdr = append(c.hdr, b[:k]...)
		b = b[k:]
		if len(c.hdr) < 12 {
			continue
		}
		h := c.hdr
		c.hdr = c.hdr[:0]
		flags, id, length := binary.BigEndian.Uint16(h[2:4]), binary.BigEndian.Uint32(h[4:8]), binary.BigEndian.Uint32(h[8:12])
		switch {
		case h[1] == frameData:
			c.body, c.bodyID = length, id
		case h[1] == frameGoAway:
			c.goAways = append(c.goAways, length)
		}
		if flags&flagRST != 0 && id >= rawID {
			c.resets[id] = true
		}
	}
	return n, err
}

// snapshot returns what the node sent on stream id, whether it reset
// it, and the GoAway codes it sent.
func (c *tamperConn) snapshot(id uint32) (data []byte, reset bool, goAways []uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.data[id]), c.resets[id], append([]uint32(nil), c.goAways...)
}

func (c *tamperConn) resetCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.resets)
}

// tamperMuxer is go-libp2p's yamux on tamperConns.
type tamperMuxer struct{ conns chan *tamperConn }

func (m tamperMuxer) NewConn(c net.Conn, isServer bool, scope network.PeerScope) (network.MuxedConn, error) {
	tc := &tamperConn{Conn: c, data: map[uint32][]byte{}, resets: map[uint32]bool{}}
	mc, err := yamux.DefaultTransport.NewConn(tc, isServer, scope)
	if err == nil {
		m.conns <- tc
	}
	return mc, err
}

// tamperHost is a hostile peer connected to n whose connection's frames
// the test can write by hand.
func tamperHost(t *testing.T, n *node.Node) (host.Host, *tamperConn) {
	t.Helper()
	m := tamperMuxer{conns: make(chan *tamperConn, 1)}
	h, err := libp2p.New(libp2p.Transport(tcp.NewTCPTransport), libp2p.ResourceManager(&network.NullResourceManager{}),
		libp2p.DisableRelay(), libp2p.DisableMetrics(), libp2p.NoListenAddrs, libp2p.Muxer(yamux.ID, m))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	if err := h.Connect(context.Background(), n.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	return h, <-m.conns
}

// msSelect is multistream-select's negotiation of proto, as a stream's
// opener writes it: the header, then the protocol, each length-prefixed.
func msSelect(proto protocol.ID) []byte {
	var b []byte
	for _, m := range []string{"/multistream/1.0.0\n", string(proto) + "\n"} {
		b = binary.AppendUvarint(b, uint64(len(m)))
		b = append(b, m...)
	}
	return b
}

// TestSynGateHostileFrames attacks the node's yamux with frames a
// go-yamux peer never writes, each on its own connection, written
// between its yamux's frames by a real libp2p peer: a data frame whose
// body holds yamux headers, SYNs among them, and whose header is split
// across writes (the node must take the body as data: it echoes it
// byte for byte, and reserves no window for it); a SYN for a stream
// already open, a data frame claiming 4 GiB, and a GoAway followed by
// SYNs (each ends the connection, as go-yamux ends it, the SYNs after a
// GoAway unread and uncounted); and a SYN flood beyond the peer's memory
// (the streams beyond it are reset, each refusal counted, the
// connection and its open stream going on). After each, every yamux
// memory span on the node has ended once the peer is gone.
func TestSynGateHostileFrames(t *testing.T) {
	const echoProto protocol.ID = "/test/echo/1.0.0"
	n := testutil.NewNode(t, node.WithPeerMemoryLimit(24*yamuxWindow))
	n.Host().SetStreamHandler(echoProto, func(s network.Stream) { io.Copy(s, s); s.Close() })

	spansEnd := func(t *testing.T, h host.Host) {
		t.Helper()
		h.Close()
		if !waitFor(within(t), func() bool { return node.LiveYamuxSpans(n) == 0 }) {
			t.Fatalf("%d yamux memory spans live on the node after the peer left", node.LiveYamuxSpans(n))
		}
	}
	// ended waits for the node to end the connection. go-yamux queues a
	// GoAway for a protocol error and closes the connection without
	// waiting for it to be written, so whether the peer gets it is a race
	// of go-yamux's own, not asserted.
	ended := func(t *testing.T, h host.Host, c *tamperConn) {
		t.Helper()
		if !waitFor(within(t), func() bool { return n.Host().Network().Connectedness(h.ID()) != network.Connected }) {
			t.Fatal("the connection went on")
		}
		_, _, goAways := c.snapshot(0)
		t.Logf("connection ended; GoAways from the node: %v", goAways)
	}

	t.Run("headers in a body", func(t *testing.T) {
		h, c := tamperHost(t, n)
		before := node.LiveYamuxSpans(n)
		var body []byte
		for id := uint32(rawID + 2); id < rawID+2+2*16; id += 2 {
			body = append(body, rawFrame(frameWindow, flagSYN, id, 0, nil)...)
		}
		body = append(body, rawFrame(frameData, flagSYN, rawID+100, 1<<31, nil)...)
		open := rawFrame(frameData, flagSYN, rawID, uint32(len(msSelect(echoProto))), msSelect(echoProto))
		data := rawFrame(frameData, 0, rawID, uint32(len(body)), body)
		if err := c.inject(open, data[:5], data[5:17], data[17:]); err != nil {
			t.Fatal(err)
		}
		want := append(msSelect(echoProto), body...)
		if !waitFor(within(t), func() bool { d, _, _ := c.snapshot(rawID); return len(d) >= len(want) }) {
			d, reset, _ := c.snapshot(rawID)
			t.Fatalf("the node sent %d bytes on the stream (reset %v), want %d", len(d), reset, len(want))
		}
		if d, _, _ := c.snapshot(rawID); !bytes.Equal(d, want) {
			t.Fatalf("the node echoed %x, want %x", d, want)
		}
		if got := node.LiveYamuxSpans(n); got >= before+16 {
			t.Fatalf("%d yamux spans live, %d before the stream: the body's SYNs reserved windows", got, before)
		}
		spansEnd(t, h)
	})

	t.Run("SYN for an open stream", func(t *testing.T) {
		h, c := tamperHost(t, n)
		open := rawFrame(frameData, flagSYN, rawID, uint32(len(msSelect(echoProto))), msSelect(echoProto))
		if err := c.inject(open, rawFrame(frameWindow, flagSYN, rawID, 0, nil)); err != nil {
			t.Fatal(err)
		}
		ended(t, h, c)
		spansEnd(t, h)
	})

	t.Run("4 GiB claimed", func(t *testing.T) {
		h, c := tamperHost(t, n)
		if err := c.inject(rawFrame(frameData, flagSYN, rawID, math.MaxUint32, []byte("cut off"))); err != nil {
			t.Fatal(err)
		}
		ended(t, h, c)
		spansEnd(t, h)
	})

	t.Run("SYNs after GoAway", func(t *testing.T) {
		h, c := tamperHost(t, n)
		refused := n.GateStats().MemoryRefused
		frames := [][]byte{rawFrame(frameGoAway, 0, 0, 0, nil)}
		for id := uint32(rawID); id < rawID+2*64; id += 2 {
			frames = append(frames, rawFrame(frameWindow, flagSYN, id, 0, nil))
		}
		// One write: the node closes the connection as it reads the GoAway.
		if err := c.inject(bytes.Join(frames, nil)); err != nil {
			t.Fatal(err)
		}
		ended(t, h, c)
		spansEnd(t, h)
		if got := n.GateStats().MemoryRefused; got != refused {
			t.Fatalf("%d memory refusals for SYNs after a GoAway", got-refused)
		}
	})

	t.Run("SYN flood", func(t *testing.T) {
		h, c := tamperHost(t, n)
		first, err := h.NewStream(network.WithNoDial(within(t), "test"), n.ID(), echoProto)
		if err != nil {
			t.Fatal(err)
		}
		if err := echo(first, "before"); err != nil {
			t.Fatal(err)
		}
		refused := n.GateStats().MemoryRefused
		const flood = 1000
		frames := make([][]byte, 0, flood)
		for i := uint32(0); i < flood; i++ {
			frames = append(frames, rawFrame(frameWindow, flagSYN, rawID+2*i, 0, nil))
		}
		if err := c.inject(frames...); err != nil {
			t.Fatal(err)
		}
		// At most the peer's limit of windows fit; every SYN beyond is
		// refused, counted, and reset at once.
		const beyond = flood - 24
		if !waitFor(within(t), func() bool { return c.resetCount() >= beyond }) {
			t.Fatalf("%d of %d flooding streams reset", c.resetCount(), flood)
		}
		t.Logf("flood: %d reset, %d refusals counted, %d spans live", c.resetCount(), n.GateStats().MemoryRefused-refused, node.LiveYamuxSpans(n))
		if live := node.LiveYamuxSpans(n); live > 24 {
			t.Fatalf("%d yamux spans live, more windows than the peer's limit (24)", live)
		}
		if got := n.GateStats().MemoryRefused - refused; got < beyond {
			t.Fatalf("%d memory refusals counted for %d streams beyond the peer's memory", got, beyond)
		}
		if n.Host().Network().Connectedness(h.ID()) != network.Connected {
			t.Fatal("a SYN flood ended the connection")
		}
		if err := echo(first, "after"); err != nil {
			t.Fatalf("the peer's open stream after its SYN flood: %v", err)
		}
		first.Reset()
		spansEnd(t, h)
	})
}
