package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	goyamux "github.com/libp2p/go-yamux/v5"
)

// yamuxMuxedConn is the node's yamux connection: go-yamux's session, as
// go-libp2p's yamux transport adapts it (its conn.go and stream.go: the
// same errors), built by the node so that its streams' IDs are known:
// what a stream's reader consumes is reported to the connection's
// frameLedger, and a stream's first window is reserved before go-yamux
// opens it (yamuxMemory).
type yamuxMuxedConn struct {
	s        *goyamux.Session
	mem      *yamuxMemory
	ledger   *frameLedger
	acceptMu sync.Mutex // one AcceptStream at a time
}

var _ network.MuxedConn = (*yamuxMuxedConn)(nil)

func (c *yamuxMuxedConn) Close() error { return c.s.Close() }

func (c *yamuxMuxedConn) CloseWithError(code network.ConnErrorCode) error {
	return c.s.CloseWithError(uint32(code))
}

func (c *yamuxMuxedConn) IsClosed() bool { return c.s.IsClosed() }

// As sets a **goyamux.Session target to the session, as go-libp2p's
// adapter does.
func (c *yamuxMuxedConn) As(target any) bool {
	if t, ok := target.(**goyamux.Session); ok {
		*t = c.s
		return true
	}
	return false
}

// OpenStream reserves the stream's first window, then opens it.
func (c *yamuxMuxedConn) OpenStream(ctx context.Context) (network.MuxedStream, error) {
	if err := c.mem.prepare(); err != nil {
		return nil, fmt.Errorf("node: stream window: %w", err)
	}
	s, err := c.s.OpenStream(ctx)
	if err != nil {
		// go-yamux returns the context's error only while waiting for a
		// slot, before it reserves; any other error comes after it did
		// (and it ended the span), or with the session ending (its
		// connection's Close ends what is reserved ahead).
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			c.mem.unprepare()
		}
		return nil, yamuxError(err)
	}
	// Followed from its SYN as written (synGate.Write), before the peer
	// can send on it, which may come after this.
	return &yamuxStream{s: s, ledger: c.ledger, rec: c.ledger.open(s.StreamID())}, nil
}

// AcceptStream returns the next stream the peer opened, with the record
// its SYN began (synGate.admit): the first of those waiting, taken
// under acceptMu so that go-yamux's order is the ledger's. Not by its
// ID: the peer may have reset the stream and opened another with its ID
// since.
func (c *yamuxMuxedConn) AcceptStream() (network.MuxedStream, error) {
	c.acceptMu.Lock()
	defer c.acceptMu.Unlock()
	s, err := c.s.AcceptStream()
	if err != nil {
		return nil, yamuxError(err)
	}
	return &yamuxStream{s: s, ledger: c.ledger, rec: c.ledger.accepted(s.StreamID())}, nil
}

// yamuxError maps go-yamux's errors to go-libp2p's, as go-libp2p's
// adapter does: a stream's reset and error code, a connection's GoAway
// code, and ErrReset for a reset.
func yamuxError(err error) error {
	if err == nil {
		return nil
	}
	var se *goyamux.StreamError
	if errors.As(err, &se) {
		return &network.StreamError{Remote: se.Remote, ErrorCode: network.StreamErrorCode(se.ErrorCode), TransportError: err}
	}
	var ce *goyamux.GoAwayError
	if errors.As(err, &ce) {
		return &network.ConnError{Remote: ce.Remote, ErrorCode: network.ConnErrorCode(ce.ErrorCode), TransportError: err}
	}
	if errors.Is(err, goyamux.ErrStreamReset) {
		return resetError{err}
	}
	return err
}

// resetError is go-yamux's reset error err, matching network.ErrReset
// too. go-libp2p's adapter prefixes network.ErrReset's text to err's,
// and both say "stream reset": "stream reset: stream reset".
type resetError struct{ err error }

func (e resetError) Error() string   { return e.err.Error() }
func (e resetError) Unwrap() []error { return []error{network.ErrReset, e.err} }

// yamuxStream is a go-yamux stream whose reads are reported to its
// connection's frameLedger.
type yamuxStream struct {
	s      *goyamux.Stream
	ledger *frameLedger
	rec    *frameRecord // nil: not followed; its fields guarded by ledger.mu
}

var _ network.MuxedStream = (*yamuxStream)(nil)

// Read reads from the stream. An error that comes with data is left for
// the next Read, which reports the stream's own state: go-yamux returns
// from a Read that delivered data the error of the window update it then
// sends, and once the session has ended that is the session's end —
// io.EOF when the peer closed the connection — though the stream may
// still hold data that arrived before, its end with it. Taken for the
// stream's end, that error would cut the stream short without a word;
// the next Read returns the rest, then io.EOF, or the stream's reset if
// its end never came.
func (s *yamuxStream) Read(b []byte) (int, error) {
	n, err := s.s.Read(b)
	if n > 0 {
		s.ledger.consume(s, n)
		return n, nil
	}
	return n, yamuxError(err)
}

func (s *yamuxStream) Write(b []byte) (int, error) {
	n, err := s.s.Write(b)
	return n, yamuxError(err)
}

// Close closes both sides; go-yamux then forgets the stream.
func (s *yamuxStream) Close() error {
	s.ledger.drop(s)
	return yamuxError(s.s.Close())
}

func (s *yamuxStream) CloseRead() error {
	s.ledger.closeSide(s, true)
	return yamuxError(s.s.CloseRead())
}

func (s *yamuxStream) CloseWrite() error {
	s.ledger.closeSide(s, false)
	return yamuxError(s.s.CloseWrite())
}

func (s *yamuxStream) Reset() error {
	s.ledger.drop(s)
	return yamuxError(s.s.Reset())
}

func (s *yamuxStream) ResetWithError(code network.StreamErrorCode) error {
	s.ledger.drop(s)
	return yamuxError(s.s.ResetWithError(uint32(code)))
}

func (s *yamuxStream) SetDeadline(t time.Time) error      { return s.s.SetDeadline(t) }
func (s *yamuxStream) SetReadDeadline(t time.Time) error  { return s.s.SetReadDeadline(t) }
func (s *yamuxStream) SetWriteDeadline(t time.Time) error { return s.s.SetWriteDeadline(t) }
