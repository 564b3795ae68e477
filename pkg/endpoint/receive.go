package endpoint

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

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
	// The last destination read (named says a frame named one): a frame
	// may repeat it without naming it, and reusing the strings saves two
	// allocations a frame.
	service, param string
	named          bool
	// alloc is allocBuf, bound once; pending collects the pooled buffers
	// of the message being decoded.
	alloc   func(int) []byte
	pending [][]byte
	// back gathers refusal records to write (refuse.go); lastRefusal is
	// the last one gathered (refused: there was one).
	back        []byte
	lastRefusal refusal
	refused     bool
	// backMu serialises the back channel's writes: the reader's and
	// Shutdown's going-away record (goAway). greeted says the hello was
	// written, goneAway that the going-away record was or will be, both
	// under backMu; backFailed that a write failed and reset the stream;
	// ended that the reader is closing the stream, its sender done.
	backMu            sync.Mutex
	greeted, goneAway bool
	backFailed        atomic.Bool
	ended             atomic.Bool
	// unm decodes small messages in place (readDelivery); elems is where
	// their elements are decoded, before they move into their delivery;
	// last is deliver's cache.
	unm   *wire.Unmarshaler
	elems []message.Element
	last  lastListener
	// inline is the room left in the delivery block of the message being
	// decoded, where allocBuf puts small elements' data.
	inline []byte
	// wakers are what listeners asked to wake once the messages already
	// read are handed over (Delivery.WakeLater).
	wakers []Waker
}

// maxWakers bounds the wakes a stream's reader defers: past it, it runs
// them, so a message spread over many destinations costs no more memory.
const maxWakers = 16

// wakeLater records w, unless it is the last one recorded already.
func (in *inStream) wakeLater(w Waker) {
	if n := len(in.wakers); n > 0 && in.wakers[n-1] == w {
		return
	}
	if len(in.wakers) == maxWakers {
		in.wake()
	}
	in.wakers = append(in.wakers, w)
}

// wake runs the deferred wakes and writes the refusals gathered. The
// reader calls it before anything that can wait: reading from the
// network, waiting for the memory budget, returning.
func (in *inStream) wake() {
	for i, w := range in.wakers {
		w.Wake()
		in.wakers[i] = nil
	}
	in.wakers = in.wakers[:0]
	in.writeBack()
}

// lastListener is the listener of the destination a stream carried last,
// as of a generation of the service's listeners.
type lastListener struct {
	gen            uint64
	service, param string
	l              Listener
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
	unm, _ := wire.NewUnmarshaler(s.decodeOpts...) // New checked the options
	in := &inStream{svc: s, peer: pi, st: st, unm: unm}
	in.br = bufio.NewReaderSize(countingReader{st, &in.prog.read}, 64<<10)
	in.fr.br = in.br
	in.alloc = in.allocBuf
	return in
}

// allocBuf gives the decoder the buffer for an element's data.
func (in *inStream) allocBuf(n int) []byte {
	if k := len(in.inline); n <= cap(in.inline)-k {
		in.inline = in.inline[:k+n]
		return in.inline[k : k+n : k+n]
	}
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
// end of stream before it is io.EOF. buffered reports that the whole
// frame, a small one, was already in the stream's buffer: then it was
// parsed from there, without marking progress for the watchdog.
func (in *inStream) readHeader() (service, param string, n int64, buffered bool, err error) {
	if k := in.br.Buffered(); k > 0 {
		b, _ := in.br.Peek(k)
		if service, param, n, hl, ok := in.parseHeader(b); ok && n <= smallFrame && int64(k-hl) >= n {
			in.br.Discard(hl)
			in.service, in.param, in.named = service, param, true
			return service, param, n, true, nil
		}
	}
	in.wake() // about to wait for the network
	service, param, n, err = in.readHeaderSlow()
	return service, param, n, false, err
}

// parseHeader parses a frame header at the start of b, reporting false
// when b does not hold one whole or it is not valid (readHeaderSlow then
// says why). hl is the header's length.
func (in *inStream) parseHeader(b []byte) (service, param string, n int64, hl int, ok bool) {
	name := func(l uint64, last string) (string, bool) {
		if l > MaxNameLen || uint64(len(b)-hl) < l {
			return "", false
		}
		nb := b[hl : hl+int(l)]
		hl += int(l)
		if string(nb) == last { // compared without allocating
			return last, true
		}
		return string(nb), true
	}
	d, k := binary.Uvarint(b)
	if k <= 0 || d == 0 && !in.named {
		return "", "", 0, 0, false
	}
	hl = k
	service, param = in.service, in.param
	if d > 0 {
		if service, ok = name(d-1, in.service); !ok {
			return
		}
		l, k := binary.Uvarint(b[hl:])
		if k <= 0 {
			return "", "", 0, 0, false
		}
		hl += k
		if param, ok = name(l, in.param); !ok {
			return
		}
	}
	l, k := binary.Uvarint(b[hl:])
	if k <= 0 || l > uint64(in.svc.opts.maxMessage) {
		return "", "", 0, 0, false
	}
	return service, param, int64(l), hl + k, true
}

// readHeaderSlow reads a frame header from the stream, as its bytes come.
func (in *inStream) readHeaderSlow() (service, param string, n int64, err error) {
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
	d, err := binary.ReadUvarint(in.br)
	if err != nil {
		return "", "", 0, fmt.Errorf("%w: %v", ErrFrame, unexpectedEOF(err))
	}
	service, param = in.service, in.param
	switch {
	case d == 0 && !in.named:
		return "", "", 0, fmt.Errorf("%w: the stream's first frame names no destination", ErrFrame)
	case d > 0:
		if service, err = in.readName(d-1, in.service); err != nil {
			return "", "", 0, err
		}
		l, err := binary.ReadUvarint(in.br)
		if err != nil {
			return "", "", 0, fmt.Errorf("%w: %v", ErrFrame, unexpectedEOF(err))
		}
		if param, err = in.readName(l, in.param); err != nil {
			return "", "", 0, err
		}
		in.service, in.param, in.named = service, param, true
	}
	l, err := binary.ReadUvarint(in.br)
	if err != nil {
		return "", "", 0, fmt.Errorf("%w: %v", ErrFrame, unexpectedEOF(err))
	}
	if l > uint64(in.svc.opts.maxMessage) {
		return "", "", 0, fmt.Errorf("%w: message of %d bytes over the limit", ErrFrame, l)
	}
	return service, param, int64(l), nil
}

// readName reads a name of l bytes, returning last instead of a new
// string when the bytes are the same.
func (in *inStream) readName(l uint64, last string) (string, error) {
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

// readDelivery decodes the n-byte message of the current frame into a new
// delivery, with its pooled buffers.
func (in *inStream) readDelivery(n int64) (*Delivery, error) {
	if n > smallFrame {
		m, bufs, err := in.readMessage(n)
		if err != nil {
			return nil, err
		}
		return &Delivery{Message: m, bufs: bufs}, nil
	}
	// Decode a small frame in place, from the stream's buffer.
	b, err := in.br.Peek(int(n))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFrame, unexpectedEOF(err))
	}
	blk := in.svc.blocks.Get().(*deliveryBlock)
	in.inline = blk.data[:0]
	elems, err := in.unm.UnmarshalElements(in.elems[:0], b, in.alloc)
	in.inline = nil
	in.br.Discard(int(n))
	bufs := in.takeBufs()
	if err != nil {
		if bufs != nil { // never seen by anyone
			(&Delivery{bufs: bufs}).Release()
		}
		in.svc.putBlock(blk)
		if errors.Is(err, io.EOF) { // an empty frame
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: %w", ErrFrame, err)
	}
	d := newDelivery(blk, elems)
	d.bufs = bufs
	clear(elems)
	if cap(elems) <= maxKeptElems {
		in.elems = elems[:0]
	}
	return d, nil
}

// maxKeptElems bounds the element storage a stream keeps between frames.
const maxKeptElems = 64

// deliveryBlock is a delivery and its message, with room for two
// elements and blockData bytes of their data, allocated together: one
// allocation instead of four for most small messages, and none once
// listeners release them (Release recycles the block through the
// service's pool).
type deliveryBlock struct {
	d    Delivery
	m    message.Message
	e    [2]message.Element
	data [blockData]byte
	// kept is the listeners' (Delivery.Kept); recycling leaves it.
	kept any
}

// blockData is the element data a delivery block holds: messages of up to
// 256 bytes (acknowledgements, events, small JSON or XML documents) need no
// buffer of their own. Larger data is allocated, or pooled from 4 KiB up
// (buffers.go).
const blockData = 256

// States of a recycled delivery, so that a block released while its
// listener runs is recycled only once the reader is done with it.
const (
	delivering uint32 = iota // the listener runs
	delivered                // the listener returned
	released                 // Release was called while it ran
)

// newDelivery makes blk the delivery of a message holding a copy of
// elems, whose data may live in blk.
func newDelivery(blk *deliveryBlock, elems []message.Element) *Delivery {
	var e []message.Element
	if len(elems) <= len(blk.e) {
		e = blk.e[:len(elems)]
		copy(e, elems)
	} else {
		e = slices.Clone(elems)
	}
	blk.m = *message.FromElements(e)
	blk.d.Message, blk.d.blk = &blk.m, blk
	return &blk.d
}

// Kept returns a slot where a listener may keep one value of its own
// with the storage of a recycled delivery, nil for a delivery that has
// none: a listener that wraps each message in a structure of its own
// keeps that structure there and finds it again in a later delivery,
// instead of allocating or pooling one per message. The value stays with
// the storage when Release recycles it and is seen by every later
// delivery that reuses it, whichever listener that is, so keep there
// only a value of a type of your own, and reset it yourself; use it only
// while you may use the delivery.
func (d *Delivery) Kept() *any {
	if d.blk == nil {
		return nil
	}
	return &d.blk.kept
}

// recycle returns d's block to the pool.
func (d *Delivery) recycle() { d.svc.putBlock(d.blk) }

// putBlock returns a block to the pool. Its data needs no clearing: the
// decoder overwrites what it hands out.
func (s *Service) putBlock(b *deliveryBlock) {
	b.d, b.m, b.e = Delivery{}, message.Message{}, [2]message.Element{}
	s.blocks.Put(b)
}

// returned is called by the reader once the listener has returned and the
// reader is done with d.
func (d *Delivery) returned() {
	if d.blk != nil && !d.state.CompareAndSwap(delivering, delivered) {
		d.recycle() // released while the listener ran
	}
}

// readMessage decodes the n-byte message of a frame larger than
// smallFrame, which must hold exactly one message, and returns it with its
// pooled buffers.
//
// A small frame is decoded from the stream's buffer. For a larger one the
// decoder is told how many bytes the frame has left (sizedFrame's Len), so
// it refuses an element longer than the frame before allocating, and
// otherwise allocates each element whole, once, and reads its bytes
// straight from the stream into it. A frame over preallocFree only gets
// that treatment within the preallocation budgets; beyond them the decoder
// is not told, and its buffers grow with the bytes that actually arrive.
func (in *inStream) readMessage(n int64) (*message.Message, *recvBufs, error) {
	in.fr.n = n
	var r io.Reader = &in.fr
	var reserved int64
	if n <= preallocFree {
		r = sizedFrame{&in.fr}
	} else if in.svc.reserve(in.peer, n) {
		r, reserved = sizedFrame{&in.fr}, n
	}
	m, err := wire.DecodeWith(r, in.alloc, in.svc.decodeOpts...)
	if reserved > 0 {
		in.svc.release(in.peer, reserved)
	}
	if err == nil && in.fr.n != 0 {
		err = fmt.Errorf("%d bytes after the message", in.fr.n)
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
