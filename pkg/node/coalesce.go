package node

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	pool "github.com/libp2p/go-buffer-pool"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	yamux "github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	goyamux "github.com/libp2p/go-yamux/v5"
)

// Write coalescing.
//
// yamux writes every frame with its own Write on the secure connection,
// so with TLS every frame is a TLS record and a system call, however
// small: a stream written one 100-byte message at a time costs a system
// call per message on each side, and a writer that queues small frames
// faster than that (64 of them fit yamux's queue) makes every frame
// behind them wait for as many system calls. go-yamux's own write
// coalescing waited for a timer, and is commented out there (go-libp2p
// issue 644).
//
// The node's yamux writes through a coalescingConn instead: a small frame
// is appended to a buffer and a writer goroutine, started when the buffer
// stops being empty and gone once it is empty again, writes the whole
// buffer in one Write, then again with whatever was appended meanwhile.
// Frames that queue behind a write leave together in the next (natural
// batching: nothing waits for a timer; a lone frame is written at once,
// a goroutine switch later). The bytes on the wire are yamux's, frame for
// frame, in the same order: only their TLS records are fuller.

// coalesceDirect is the frame size from which a frame is written straight
// from yamux's buffer, after what is buffered: TLS writes at most 16 KiB
// per record, each with its own system call, so coalescing a frame this
// large with others saves none and would only copy it.
const coalesceDirect = 16 << 10

// coalesceMax bounds the small frames buffered for the writer, per
// connection: as much as one yamux frame at its largest, which is what
// yamux's own writer holds at a time. While the writer writes one full
// buffer the next fills; beyond both, yamux's writer waits, as it waits
// for the system call without coalescing, and its queue then holds the
// rest: what a peer that stops reading makes the node hold grows by two
// buffers per connection at most.
const coalesceMax = 64 << 10

// WriteChunk returns the largest write to a stream of c whose bytes its
// reader gets as they arrive, or 0 when no bound helps. go-yamux cuts a
// stream's writes into frames of up to 64 KiB and hands on a frame's
// bytes only once all of them have arrived: on a slow link the reader of
// a large message sees nothing for as long as 64 KiB takes (the
// endpoint's frame watchdog reset honest senders for it), and the
// reader's yamux, which pings when no frame has begun for 30 s and closes
// the connection when the answer, queued behind the frame's rest, takes
// over 10 s, closed links below about 2.2 KB/s. On yamux over TLS, a
// write of WriteChunk bytes is one 16 KiB frame, which TLS sends as one
// record, as it sent a 64 KiB frame as four and a fifth of 12 bytes: no
// slower (BenchmarkEndpointLarge). Elsewhere it is 0: QUIC has no such
// frames, and Noise sends a frame as one message of up to 64 KiB, so that
// 16 KiB frames cost it a message and a system call per 16 KiB, and a
// quarter of its throughput on loopback.
func WriteChunk(c network.Conn) int {
	if s := c.ConnState(); s.StreamMultiplexer == yamux.ID && s.Security == libp2ptls.ID {
		return tlsRecord - yamuxHeaderSize
	}
	return 0
}

// tlsRecord is the most a TLS record carries (crypto/tls's maxPlaintext).
const tlsRecord = 16 << 10

// closeDrain bounds how long closing a connection waits for the writer to
// write what yamux handed it (the session's last frames, its GoAway)
// before it closes the connection under the write still in progress:
// yamux's own wait for writing a GoAway, so a peer that does not read
// holds a closing connection no longer than yamux lets it.
const closeDrain = 100 * time.Millisecond

// coalescingMuxer is go-libp2p's yamux transport on coalescingConns,
// each stream's first window reserved before yamux reserves it, so that
// a refusal costs the stream, not the connection (yamuxspan.go), and
// each stream's buffered frames followed, so that their cost stays
// bounded (yamuxframes.go). The session is built here, with the
// transport's configuration and spans of the peer's scope as its NewConn
// builds them, so that the node knows its streams' IDs.
type coalescingMuxer struct {
	*yamux.Transport
	spans  *atomic.Int64  // memory spans begun and not ended
	resets *atomic.Uint64 // streams reset for their frames (GateStats.FramesReset)
}

func (m coalescingMuxer) NewConn(c net.Conn, isServer bool, scope network.PeerScope) (network.MuxedConn, error) {
	cc := newCoalescingConn(c)
	if scope == nil { // yamux takes a nil scope for none
		return m.Transport.NewConn(cc, isServer, nil)
	}
	cfg := m.Config()
	return newYamuxMuxedConn(cc, isServer, cfg, &yamuxMemory{scope: scope, live: m.spans}, newFrameLedger(m.resets, cfg.AcceptBacklog))
}

// newYamuxMuxedConn builds a yamux session on cc through a synGate,
// its streams' spans begun in mem's scope as go-libp2p's transport
// begins them.
func newYamuxMuxedConn(cc *coalescingConn, isServer bool, cfg *goyamux.Config, mem *yamuxMemory, ledger *frameLedger) (*yamuxMuxedConn, error) {
	gs := yamuxScope{mem.scope, mem}
	newSpan := func() (goyamux.MemoryManager, error) { return gs.BeginSpan() }
	newSession := goyamux.Client
	if isServer {
		newSession = goyamux.Server
	}
	s, err := newSession(newSynGate(cc, mem, ledger), cfg, newSpan)
	if err != nil {
		ledger.close()
		mem.close()
		return nil, err
	}
	return &yamuxMuxedConn{s: s, mem: mem, ledger: ledger}, nil
}

// defaultMuxer offers yamux with its writes coalesced, unless muxers were
// given with WithLibp2pOptions; spans counts its live memory spans,
// resets the streams it reset for their frames.
func defaultMuxer(spans *atomic.Int64, resets *atomic.Uint64) libp2p.Option {
	return func(cfg *libp2p.Config) error {
		if len(cfg.Muxers) > 0 {
			return nil
		}
		return cfg.Apply(libp2p.Muxer(yamux.ID, coalescingMuxer{yamux.DefaultTransport, spans, resets}))
	}
}

// coalescingConn is a connection whose small writes are coalesced (see
// above). Its Write returns once the frame is buffered or, for a large
// one, written; a write that fails fails every later Write and Read with
// its error.
type coalescingConn struct {
	net.Conn

	mu      sync.Mutex
	changed sync.Cond // the writer took the buffer, finished, or failed
	buf     []byte    // small frames not yet taken by the writer (pooled)
	writing bool      // the writer runs, or a large frame is being written
	err     error     // the first write error, or net.ErrClosed
	closed  bool
}

func newCoalescingConn(c net.Conn) *coalescingConn {
	cc := &coalescingConn{Conn: c}
	cc.changed.L = &cc.mu
	return cc
}

// Write buffers p for the writer, waiting while the buffer is full, or
// writes it directly if it is coalesceDirect bytes or more, once what is
// buffered before it is written. Frames buffered by Writes that come
// during a direct one leave after it.
func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(p) == 0 && c.err == nil && !c.closed {
		return 0, nil // nothing to write, nor a buffer to take for it
	}
	for {
		switch {
		case c.closed:
			return 0, net.ErrClosed
		case c.err != nil:
			return 0, c.err
		case len(p) >= coalesceDirect:
			if c.writing || len(c.buf) > 0 {
				c.changed.Wait()
				continue
			}
			c.writing = true
			c.mu.Unlock()
			n, err := c.Conn.Write(p)
			c.mu.Lock()
			c.writing = false
			c.changed.Broadcast()
			if err != nil {
				c.failLocked(err)
			} else if len(c.buf) > 0 {
				// Frames buffered by Writes that came during this one.
				c.writing = true
				go c.writeLoop()
			}
			return n, err
		case len(c.buf) > 0 && len(c.buf)+len(p) > coalesceMax:
			c.changed.Wait()
			continue
		}
		break
	}
	if c.buf == nil {
		c.buf = pool.Get(coalesceMax)[:0]
	}
	c.buf = append(c.buf, p...)
	if !c.writing {
		c.writing = true
		go c.writeLoop()
	}
	return len(p), nil
}

// writeLoop writes the buffer until it finds it empty.
func (c *coalescingConn) writeLoop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.buf) > 0 && c.err == nil {
		b := c.buf
		c.buf = nil
		c.changed.Broadcast()
		c.mu.Unlock()
		_, err := c.Conn.Write(b)
		pool.Put(b)
		c.mu.Lock()
		if err != nil {
			c.failLocked(err)
		}
	}
	if c.buf != nil && c.err != nil {
		pool.Put(c.buf)
		c.buf = nil
	}
	c.writing = false
	c.changed.Broadcast()
}

// failLocked records a write's error and ends the reads too, so that the
// session ends, closing the connection, as it would had its own Write
// failed.
func (c *coalescingConn) failLocked(err error) {
	if c.err == nil {
		c.err = err
		c.Conn.SetReadDeadline(time.Now())
	}
	c.changed.Broadcast()
}

// Read reads from the connection; once a write failed, its error is what
// a Read that then fails returns, the cause of the session's end.
func (c *coalescingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.mu.Lock()
		if c.err != nil && !c.closed {
			err = c.err
		}
		c.mu.Unlock()
	}
	return n, err
}

// Close lets the writer write what is buffered for closeDrain at most,
// then closes the connection, which ends a write still in progress (as
// net.Conn's Close ends any blocked Write), and fails every Write waiting
// or to come with net.ErrClosed. Every Close, also one called while
// another is draining, returns only once the writer is gone. The drain is
// timed here, not by a write deadline: setting one on libp2p's WebSocket
// connection waits for the write in progress, which a peer that does not
// read holds until yamux's own deadline passes.
func (c *coalescingConn) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.changed.Broadcast() // Writes waiting for room fail now
	}
	c.drainLocked()
	c.mu.Unlock()
	err := c.Conn.Close()
	c.mu.Lock()
	for c.writing {
		c.changed.Wait()
	}
	c.err = net.ErrClosed
	if c.buf != nil {
		pool.Put(c.buf)
		c.buf = nil
	}
	c.changed.Broadcast()
	c.mu.Unlock()
	return err
}

// drainLocked waits until the writer is done or closeDrain has passed.
func (c *coalescingConn) drainLocked() {
	if !c.writing {
		return
	}
	expired := false
	t := time.AfterFunc(closeDrain, func() {
		c.mu.Lock()
		expired = true
		c.changed.Broadcast()
		c.mu.Unlock()
	})
	defer t.Stop()
	for c.writing && !expired {
		c.changed.Wait()
	}
}
