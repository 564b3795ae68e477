package socket

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/jxtarel"
)

// Conn is a socket connection. It implements net.Conn, with CloseWrite
// and CloseRead for half-closing as *net.TCPConn has.
type Conn struct {
	svc    *Service // nil for a JXTA socket
	owner  *Service // the service that handed it out (handOut), for Shutdown
	st     stream
	sec    string // what secures it (Security)
	adv    *adv.PipeAdvertisement
	brMu   sync.Mutex
	br     *bufio.Reader // what the handshake read ahead, if anything
	local  Addr
	remote Addr

	// yamux streams take one writer at a time (two at once can overrun
	// the peer's window, which kills the whole libp2p connection), so
	// writes queue here, honouring the write deadline while they wait.
	wlock chan struct{}
	// The deadlines as deadlineNanos gives them, checked before any
	// I/O: a stream returns bytes it holds, or takes some while its
	// window has room, past its deadline, where package net's conns
	// fail.
	rdeadline atomic.Int64
	wdeadline atomic.Int64
	closed    chan struct{}
	closeOnce sync.Once
	readEOF   atomic.Bool // the other side finished sending
	wclosed   atomic.Bool // CloseWrite was called
	rclosed   atomic.Bool // CloseRead was called: Reads end, as on TCP
	// reading is held by each Read and by the linger after Close: a
	// yamux stream takes one reader at a time (two Reads at once race
	// in its window update, and it wakes one waiting reader per
	// arrival, so the drain must not run beside a Read either), while
	// net.Conn lets callers read from several goroutines.
	reading sync.Mutex
}

// lingerTimeout bounds how long a closed connection keeps reading and
// discarding what the other side still sends.
const lingerTimeout = 5 * time.Second

var _ net.Conn = (*Conn)(nil)

// stream is what carries a Conn's bytes: a libp2p stream, or a JXTA
// socket's reliable pipe pair (jxta.go).
type stream interface {
	io.ReadWriteCloser
	CloseWrite() error
	CloseRead() error
	Reset() error
	SetDeadline(time.Time) error
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

func newConn(svc *Service, st network.Stream, a *adv.PipeAdvertisement, br *bufio.Reader) *Conn {
	c := st.Conn()
	if br != nil && br.Buffered() == 0 {
		br = nil
	}
	return &Conn{svc: svc, st: st, sec: endpoint.ConnSecurity(c), adv: a, br: br,
		local:  Addr{Peer: c.LocalPeer(), Pipe: a.ID},
		remote: Addr{Peer: c.RemotePeer(), Pipe: a.ID},
		wlock:  make(chan struct{}, 1), closed: make(chan struct{})}
}

// Read implements net.Conn. It returns io.EOF after the other side's last
// byte once that side has closed or half-closed, and only then (or after
// this side's CloseRead, as on TCP): when the stream ends otherwise (the other side's Reset, its peer gone, the
// connection lost), Read and Write fail with an error matching ErrReset;
// when this side's node closed it after the socket service (a Peer's
// Close), with ErrClosed.
func (c *Conn) Read(b []byte) (int, error) {
	if c.isClosed() {
		return 0, c.wrap("read", ErrClosed)
	}
	c.reading.Lock()
	defer c.reading.Unlock()
	if c.isClosed() {
		return 0, c.wrap("read", ErrClosed)
	}
	if c.rclosed.Load() {
		return 0, io.EOF
	}
	if expired(c.rdeadline.Load()) {
		return 0, c.wrap("read", timeoutError{os.ErrDeadlineExceeded})
	}
	c.brMu.Lock()
	if c.br != nil {
		n, _ := c.br.Read(b)
		if c.br.Buffered() == 0 {
			c.br = nil
		}
		c.brMu.Unlock()
		return n, nil
	}
	c.brMu.Unlock()
	n, err := c.st.Read(b)
	if err == io.EOF {
		c.readEOF.Store(true)
	}
	if err != nil && c.rclosed.Load() && !c.isClosed() {
		return n, io.EOF // CloseRead's reset of the stream's reading, not the other side's
	}
	return n, c.wrap("read", err)
}

func (c *Conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// Write implements net.Conn. It blocks while the other side's receive
// window is full (flow control).
func (c *Conn) Write(b []byte) (int, error) {
	if err := c.lockWrite(); err != nil {
		return 0, c.wrap("write", err)
	}
	defer func() { <-c.wlock }()
	if c.wclosed.Load() {
		return 0, c.wrap("write", errWriteClosed)
	}
	if expired(c.wdeadline.Load()) {
		return 0, c.wrap("write", timeoutError{os.ErrDeadlineExceeded})
	}
	n, err := c.st.Write(b)
	return n, c.wrap("write", err)
}

// errWriteClosed is what a Write after CloseWrite fails with, as a
// JXTA socket's does.
var errWriteClosed = fmt.Errorf("%w (written after CloseWrite)", ErrClosed)

func (c *Conn) lockWrite() error {
	select {
	case c.wlock <- struct{}{}:
		return nil
	default:
	}
	var timeout <-chan time.Time
	if dl := c.wdeadline.Load(); dl != 0 {
		d := time.Until(time.Unix(0, dl))
		if d <= 0 {
			return timeoutError{os.ErrDeadlineExceeded}
		}
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case c.wlock <- struct{}{}:
		return nil
	case <-timeout:
		return timeoutError{os.ErrDeadlineExceeded}
	case <-c.closed:
		return ErrClosed
	}
}

// Close closes the connection in both directions. The other side reads the
// bytes already written, then io.EOF, as long as the connection under it
// lasts: Close does not wait for them to leave, so a node closed right
// after (a Peer's Close) cuts them off and the other side's Read fails; a
// Peer's Shutdown waits until they are read. If the other side has not
// finished sending, what it still sends is read and discarded for up to a
// few seconds, then the stream is reset and its writes fail; without that,
// on yamux they would stall for ever once its window filled. Pending Reads
// and Writes are unblocked with net.ErrClosed.
func (c *Conn) Close() error {
	first := false
	c.closeOnce.Do(func() { close(c.closed); first = true })
	if !first {
		return c.wrap("close", ErrClosed)
	}
	if c.owner != nil {
		c.owner.forget(c)
	}
	if js, ok := c.st.(*jxtaStream); ok {
		// JXTA's close is a full close: the other side answers it and
		// stops sending, so nothing is left to drain.
		if err := js.Close(); err != nil {
			// Not wrap's ErrClosed: blocks may not have arrived.
			return &net.OpError{Op: "close", Net: Network, Source: c.local, Addr: c.remote, Err: err}
		}
		return nil
	}
	if c.readEOF.Load() {
		c.st.SetWriteDeadline(time.Unix(1, 0)) // unblock pending Writes
		return c.wrap("close", c.st.Close())
	}
	err := c.st.CloseWrite()
	c.st.SetWriteDeadline(time.Unix(1, 0)) // unblock pending Writes
	c.st.SetReadDeadline(time.Unix(1, 0))  // and Reads
	go c.linger()
	return c.wrap("close", err)
}

// Reset aborts the connection in both directions at once. Unlike Close,
// which the other side reads as io.EOF after the bytes written, Reset
// makes the other side's Reads fail with an error: a writer that stops
// before its data ends (interrupted, its input failed) uses it so that
// the reader cannot take what arrived for everything. Pending Reads and
// Writes are unblocked with net.ErrClosed.
func (c *Conn) Reset() error {
	first := false
	c.closeOnce.Do(func() { close(c.closed); first = true })
	if !first {
		return c.wrap("reset", ErrClosed)
	}
	if c.owner != nil {
		c.owner.forget(c)
	}
	err := c.st.Reset()
	if err != nil {
		return &net.OpError{Op: "reset", Net: Network, Source: c.local, Addr: c.remote, Err: err}
	}
	return nil
}

// linger drains what the other side still sends after Close, for at
// most lingerTimeout, then resets the stream. It starts once the Reads
// Close unblocked have returned, and holds no lock: a Read after Close
// fails at once.
func (c *Conn) linger() {
	c.reading.Lock()
	//lint:ignore SA2001 a barrier: the Reads Close unblocked hold it until they return
	c.reading.Unlock()
	reset := time.AfterFunc(lingerTimeout, func() { c.st.Reset() })
	defer reset.Stop()
	c.st.SetReadDeadline(time.Time{}) // Close's, to unblock Reads
	if _, err := io.Copy(io.Discard, c.st); err != nil {
		c.st.Reset()
		return
	}
	c.st.Close()
}

// CloseWrite half-closes: the other side reads io.EOF after the bytes
// already written, and this side can still read. Writes after it fail
// with ErrClosed. A socket to a JXTA peer has no half-close (JXTA's close
// ends both directions): the other side can write no more, and Reads here
// return what arrived before, then ErrClosed, not io.EOF.
func (c *Conn) CloseWrite() error {
	c.wclosed.Store(true)
	return c.wrap("close", c.st.CloseWrite())
}

// shutdown ends c's writing for Service.Shutdown, once a Write in
// progress returns, unless ctx ends first.
func (c *Conn) shutdown(ctx context.Context) error {
	select {
	case c.wlock <- struct{}{}:
	case <-c.closed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("socket to %s: a write still in progress: %w", c.remote, ctx.Err())
	}
	defer func() { <-c.wlock }()
	if c.wclosed.Swap(true) {
		return nil
	}
	if js, ok := c.st.(*jxtaStream); ok {
		if err := js.closeWrite(ctx); err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("its blocks not yet acknowledged: %w", ctx.Err())
			}
			return fmt.Errorf("socket to %s: %w", c.remote, err)
		}
		return nil
	}
	// The multiplexer queues the end of stream behind what the
	// connection has yet to write, without a deadline: a peer that stopped
	// reading holds it until the connection's own write timeout.
	ended := make(chan struct{})
	go func() {
		c.st.CloseWrite() // its error, if any, is the stream's end: nothing left to end
		close(ended)
	}()
	select {
	case <-ended:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("socket to %s: its end not yet sent: %w", c.remote, ctx.Err())
	}
}

// CloseRead stops reading: Reads then return io.EOF, as on TCP. Unlike
// TCP, the multiplexer does not tell the other side: its further writes
// stall once its flow-control window is full, until it closes (or this
// side closes, see Close).
func (c *Conn) CloseRead() error {
	c.rclosed.Store(true)
	return c.wrap("close", c.st.CloseRead())
}

// LocalAddr implements net.Conn: this peer and the pipe.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr implements net.Conn: the other peer and the pipe.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// RemotePeer is the peer at the other end, proven by its key; empty for
// a JXTA peer (see RemoteAddr's JXTAPeer).
func (c *Conn) RemotePeer() peer.ID { return c.remote.Peer }

// Security names what authenticates and encrypts the connection (see
// endpoint.Delivery.Security); empty for a JXTA socket, whose transport
// signs but does not encrypt.
func (c *Conn) Security() string { return c.sec }

// ReliableStats returns the counters of a JXTA socket's reliable layer
// (see package jxtarel; an unreliable one counts only blocks sent and
// received, those dropped because the reader was behind (DroppedFull) and
// those larger than any socket sends (Oversized)); false for a
// libp2p socket, whose stream multiplexer does that work.
func (c *Conn) ReliableStats() (jxtarel.Stats, bool) {
	if js, ok := c.st.(*jxtaStream); ok {
		return js.rel.Stats(), true
	}
	return jxtarel.Stats{}, false
}

// Adv returns the pipe's advertisement.
func (c *Conn) Adv() *adv.PipeAdvertisement { return c.adv }

// SetDeadline implements net.Conn. After Close it fails, as the
// deadline setters do.
func (c *Conn) SetDeadline(t time.Time) error {
	if c.isClosed() {
		return c.wrap("set", ErrClosed)
	}
	c.rdeadline.Store(deadlineNanos(t))
	c.wdeadline.Store(deadlineNanos(t))
	return c.wrap("set", c.st.SetDeadline(t))
}

// deadlineNanos is a deadline as Unix nanoseconds, 0 for none.
func deadlineNanos(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.After(maxDeadline):
		return maxDeadline.UnixNano()
	case t.Before(time.Unix(0, 1)):
		return 1 // long past, as any Unix nanosecond 0 or earlier
	}
	return t.UnixNano()
}

// maxDeadline is the latest deadline UnixNano can hold (year 2262):
// later ones are as good as none.
var maxDeadline = time.Unix(0, math.MaxInt64)

// expired reports whether the deadline d (deadlineNanos) has passed.
func expired(d int64) bool { return d != 0 && time.Now().UnixNano() >= d }

// SetReadDeadline implements net.Conn.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.isClosed() {
		return c.wrap("set", ErrClosed)
	}
	c.rdeadline.Store(deadlineNanos(t))
	return c.wrap("set", c.st.SetReadDeadline(t))
}

// SetWriteDeadline implements net.Conn.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if c.isClosed() {
		return c.wrap("set", ErrClosed)
	}
	c.wdeadline.Store(deadlineNanos(t))
	return c.wrap("set", c.st.SetWriteDeadline(t))
}

// wrap turns a stream error into a *net.OpError, as package net reports
// errors; io.EOF stays itself, and a deadline's error reports Timeout().
func (c *Conn) wrap(op string, err error) error {
	if err == nil || err == io.EOF && op != "write" {
		return err
	}
	switch {
	case c.isClosed():
		err = ErrClosed
	case c.closedHere(err):
		err = fmt.Errorf("%w (this node closed: %v)", ErrClosed, err)
	case errors.Is(err, network.ErrReset):
		err = newResetError(err)
	case c.lost(err):
		err = newResetError(fmt.Errorf("%w: connection lost: %w", network.ErrReset, err))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && !errors.Is(err, timeoutError{}) {
		err = timeoutError{err}
	}
	return &net.OpError{Op: op, Net: Network, Source: c.local, Addr: c.remote, Err: err}
}

// closedHere reports whether err is the end of the connection under the
// stream that this side's Close made after the socket service closed:
// a Peer's Close closes the socket service, then the node, whose host
// ends every connection. Reads and Writes then fail with ErrClosed, as
// after the Conn's own Close, rather than ErrReset.
func (c *Conn) closedHere(err error) bool {
	var ce *network.ConnError
	return c.svc != nil && errors.As(err, &ce) && !ce.Remote && c.svc.isClosed()
}

// lost reports whether err is the end of the libp2p connection under
// the stream, as yamux hands it to a Write that reached the connection
// as it ended (before the stream was reset with it): the connection's
// own error ("read tcp ...: connection reset by peer", io.EOF), which
// matches no sentinel of this package. It is a lost connection, ErrReset.
func (c *Conn) lost(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	if c.svc != nil && c.svc.isClosed() {
		return false
	}
	st, ok := c.st.(network.Stream)
	return ok && st.Conn().IsClosed()
}

// resetError is a stream's reset as Read and Write report it: its text
// is the stream's error, and it matches ErrReset and the stream's error
// chain (network.ErrReset, the connection's syscall.Errno, ...), unless
// that chain matches io.EOF: when the connection under a yamux stream
// ends with a bare end of stream (the peer's process closed or died),
// yamux resets the stream with an error that wraps io.EOF, which callers
// would take for a clean end. Then it matches only ErrReset,
// network.ErrReset and the stream's *network.StreamError or
// *network.ConnError (for their codes) if one is there without io.EOF.
type resetError struct {
	err  error
	errs []error
}

func newResetError(err error) *resetError {
	e := &resetError{err: err, errs: []error{ErrReset, err}}
	if !errors.Is(err, io.EOF) {
		return e
	}
	e.errs = []error{ErrReset, network.ErrReset}
	var se *network.StreamError
	var ce *network.ConnError
	switch {
	case errors.As(err, &se) && !errors.Is(se, io.EOF):
		e.errs = append(e.errs, se)
	case errors.As(err, &ce) && !errors.Is(ce, io.EOF):
		e.errs = append(e.errs, ce)
	}
	return e
}

func (e *resetError) Error() string   { return e.err.Error() }
func (e *resetError) Unwrap() []error { return e.errs }

// timeoutError marks a deadline's error so errors.Is(err,
// os.ErrDeadlineExceeded) holds, as it does for package net's conns.
type timeoutError struct{ error }

func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
func (e timeoutError) Unwrap() error { return e.error }
func (e timeoutError) Is(target error) bool {
	_, ok := target.(timeoutError)
	return ok || target == os.ErrDeadlineExceeded
}
