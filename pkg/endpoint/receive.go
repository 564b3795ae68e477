package endpoint

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// inStream is the reading side of one incoming endpoint stream. Its
// buffers live as long as the stream, so reading a small message
// allocates only the message itself.
type inStream struct {
	svc  *Service
	peer *peerIn
	st   network.Stream
	prog progress // for the frame watchdog (budget.go)
	br   *bufio.Reader
	fr   frameReader
	// The last service and param read: a stream mostly carries one
	// destination, and reusing the strings saves two allocations a frame.
	service, param string
	// alloc is allocBuf, bound once; pending collects the pooled buffers
	// of the message being decoded.
	alloc   func(int) []byte
	pending [][]byte
	small   bytes.Reader // over a small frame in br's buffer
	back    []byte       // a refusal record being written
}

// failed counts a frame that could not be read, unless the watchdog reset
// its stream (and counted it).
func (in *inStream) failed() {
	if !in.prog.timedOut.Load() {
		in.svc.stats.malformed.Add(1)
	}
}

// smallFrame is the largest frame decoded in place from the stream's
// buffer (64 KiB), sparing the decoder's small reads a layer of readers.
const smallFrame = 16 << 10

func newInStream(s *Service, pi *peerIn, st network.Stream) *inStream {
	in := &inStream{svc: s, peer: pi, st: st}
	in.br = bufio.NewReaderSize(countingReader{st, &in.prog.read}, 64<<10)
	in.fr.br = in.br
	in.alloc = in.allocBuf
	return in
}

// allocBuf gives the decoder the buffer for an element's data.
func (in *inStream) allocBuf(n int) []byte {
	b := in.svc.bufs.get(n)
	if n >= poolMin {
		in.pending = append(in.pending, b) // with its spare capacity, for the pool
	}
	return b[:n:n]
}

// takeBufs returns the pooled buffers of the message just decoded.
func (in *inStream) takeBufs() *recvBufs {
	if len(in.pending) == 0 {
		return nil
	}
	b := &recvBufs{pool: &in.svc.bufs, bufs: append([][]byte(nil), in.pending...)}
	clear(in.pending)
	in.pending = in.pending[:0]
	return b
}

// readHeader reads a frame header: service, param, message length. A clean
// end of stream before it is io.EOF.
func (in *inStream) readHeader() (service, param string, n int64, err error) {
	if in.br.Buffered() == 0 {
		// Idle between frames: no deadline. The frame starts with its
		// first byte.
		if _, err := in.br.Peek(1); err != nil {
			if err == io.EOF {
				return "", "", 0, io.EOF
			}
			return "", "", 0, fmt.Errorf("%w: %v", ErrFrame, err)
		}
	}
	in.prog.frames.Add(1)
	in.prog.reading.Store(true)
	if service, err = in.readName(in.service, true); err != nil {
		return "", "", 0, err
	}
	if param, err = in.readName(in.param, false); err != nil {
		return "", "", 0, err
	}
	in.service, in.param = service, param
	l, err := binary.ReadUvarint(in.br)
	if err != nil {
		return "", "", 0, fmt.Errorf("%w: %v", ErrFrame, unexpectedEOF(err))
	}
	if l > uint64(in.svc.opts.maxMessage) {
		return "", "", 0, fmt.Errorf("%w: message of %d bytes over the limit", ErrFrame, l)
	}
	return service, param, int64(l), nil
}

// readName reads a length-prefixed name, returning last instead of a new
// string when the bytes are the same.
func (in *inStream) readName(last string, first bool) (string, error) {
	l, err := binary.ReadUvarint(in.br)
	if err != nil {
		if first && err == io.EOF {
			return "", io.EOF
		}
		return "", fmt.Errorf("%w: %v", ErrFrame, unexpectedEOF(err))
	}
	if l > MaxNameLen { // so Peek below fits the buffer
		return "", fmt.Errorf("%w: name of %d bytes", ErrFrame, l)
	}
	b, err := in.br.Peek(int(l))
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrFrame, unexpectedEOF(err))
	}
	s := last
	if string(b) != last { // compared without allocating
		s = string(b)
	}
	in.br.Discard(int(l))
	return s, nil
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readMessage decodes the n-byte message of the current frame, which must
// hold exactly one message, and returns it with its pooled buffers.
//
// A small frame is decoded from the stream's buffer. For a larger one the
// decoder is told how many bytes the frame has left (sizedFrame's Len), so
// it refuses an element longer than the frame before allocating, and
// otherwise allocates each element whole, once, and reads its bytes
// straight from the stream into it. A frame over preallocFree only gets
// that treatment within the preallocation budgets; beyond them the decoder
// is not told, and its buffers grow with the bytes that actually arrive.
func (in *inStream) readMessage(n int64) (*message.Message, *recvBufs, error) {
	var m *message.Message
	var err error
	if n <= smallFrame {
		// Decode a small frame in place, from the stream's buffer.
		var b []byte
		if b, err = in.br.Peek(int(n)); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrFrame, unexpectedEOF(err))
		}
		in.small.Reset(b)
		m, err = wire.DecodeWith(&in.small, in.alloc, in.svc.decodeOpts...)
		if err == nil && in.small.Len() != 0 {
			err = fmt.Errorf("%d bytes after the message", in.small.Len())
		}
		in.small.Reset(nil)
		in.br.Discard(int(n))
	} else {
		in.fr.n = n
		var r io.Reader = &in.fr
		var reserved int64
		if n <= preallocFree {
			r = sizedFrame{&in.fr}
		} else if in.svc.reserve(in.peer, n) {
			r, reserved = sizedFrame{&in.fr}, n
		}
		m, err = wire.DecodeWith(r, in.alloc, in.svc.decodeOpts...)
		if reserved > 0 {
			in.svc.release(in.peer, reserved)
		}
		if err == nil && in.fr.n != 0 {
			err = fmt.Errorf("%d bytes after the message", in.fr.n)
		}
	}
	bufs := in.takeBufs()
	if err != nil {
		if bufs != nil { // never seen by anyone
			(&Delivery{bufs: bufs}).Release()
		}
		if errors.Is(err, io.EOF) { // an empty frame
			err = io.ErrUnexpectedEOF
		}
		return nil, nil, fmt.Errorf("%w: %w", ErrFrame, err)
	}
	return m, bufs, nil
}

// frameReader reads what is left of the current frame.
type frameReader struct {
	br *bufio.Reader
	n  int64 // bytes of the frame not yet read
}

// Read reads from the stream's buffer, or, for reads of at least its
// size, straight from the stream into p.
func (f *frameReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > f.n {
		p = p[:f.n]
	}
	n, err := f.br.Read(p)
	f.n -= int64(n)
	return n, err
}

// sizedFrame is a frameReader that tells wire.Decode how many bytes are
// left in it.
type sizedFrame struct{ *frameReader }

// Len returns the bytes left in the frame.
func (f sizedFrame) Len() int { return int(f.n) }
