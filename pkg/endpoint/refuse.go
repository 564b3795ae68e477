package endpoint

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/internal/joinerr"
)

// The back channel. Frames flow from sender to receiver; the receiver
// answers on the same stream, in the other direction, with records:
//
//	'H' uvarint(version) uvarint(max message size)      once, first
//	'R' code uvarint(len) service uvarint(len) param uvarint(len) reason
//	'S'                                                  the previous 'R' again
//	'G'                                                  going away: end this stream
//
// The hello tells the sender the receiver's limit, so a message over it
// fails at the sender (ErrTooLarge) rather than as a reset stream. A refusal
// says a message to service/param was not handed to any listener: none was
// registered there (RefusedNoListener), the one registered refused it
// (RefusedByListener, Delivery.Refuse), or its source element lied
// (RefusedForged). A refusal like the stream's previous one (code,
// destination, reason) is the one byte 'S', so that frames which do not name
// their destination (see the package doc) cannot make the receiver write it
// back at length: the back channel carries at most a byte per frame beyond
// the names the sender wrote. Refusals are gathered and written before the
// receiver waits for anything (the next frame's bytes, the memory budget) or
// returns, so they precede the end of stream Flush waits for: Flush sees
// every refusal of the messages it covers. A receiver that shuts down
// (Service.Shutdown) writes 'G' on each stream it is reading, so that a
// sender with nothing more to send ends its stream rather than hold the
// receiver until Shutdown's ctx ends; a sender ends it as Flush would, its
// queued frames first. 'G' and refusal code 3 (RefusedForged) came with
// version 2: a version 1 sender resets the stream on them, as on anything
// unknown, which its next Flush reports as possible loss.

// Refusal codes, in RefusedError.Code.
const (
	// RefusedNoListener: no listener is registered for the destination.
	RefusedNoListener = 1
	// RefusedByListener: the listener called Delivery.Refuse.
	RefusedByListener = 2
	// RefusedForged: the message's jxta:EndpointSourceAddress element
	// names anything but its sender's own address (ErrSourceForged);
	// back channel version 2.
	RefusedForged = 3
)

const (
	recHello   = 'H'
	recRefusal = 'R'
	recSame    = 'S'
	recGoAway  = 'G'
	// backVersion is the back channel's version in the hello.
	backVersion = 2
	// MaxReasonLen bounds a refusal's reason, in bytes: a sentence, not a
	// document.
	MaxReasonLen = 256
	// backWriteTimeout bounds a receiver's write of a record: a sender
	// that does not read its back channel for that long is not one the
	// receiver waits for, and its stream is reset.
	backWriteTimeout = 10 * time.Second
	// helloWait is the size from which a Send waits for the receiver's
	// hello on a new stream before writing, to check the message against
	// the receiver's limit. Smaller messages go at once (the minimum limit
	// a receiver should set is well above it; see WithMaxMessageSize) and
	// are checked once the hello has arrived.
	helloWait = 64 << 10
	// maxRefusalKeys bounds the destinations whose refusals a sender
	// keeps apart until they are reported; refusals for more are summed.
	maxRefusalKeys = 256
	// maxBackBatch is how many bytes of refusals a receiver gathers
	// before it writes them, however many frames it has yet to read: a
	// TLS record's worth.
	maxBackBatch = 16 << 10
)

// ErrRefused is what a RefusedError unwraps to.
var ErrRefused = errors.New("endpoint: message refused by the receiving peer")

// ErrTooLarge is what a LimitError unwraps to.
var ErrTooLarge = errors.New("endpoint: message larger than the receiving peer accepts")

// RefusedError reports messages the receiving peer did not hand to any
// listener. It is returned by the next Send to the same destination
// (which then sends nothing) or by Flush, once per refusal.
type RefusedError struct {
	Peer           peer.ID
	Service, Param string // the destination of the refused messages; both "" for the sum over untracked destinations
	Count          int    // messages refused
	Code           int    // the last refusal's code (RefusedNoListener, RefusedByListener)
	Reason         string // the last refusal's reason, as the peer gave it (untrusted text)
}

func (e *RefusedError) Error() string {
	what := "no listener"
	switch e.Code {
	case RefusedByListener:
		what = "refused by the listener"
	case RefusedForged:
		what = "its source element names another peer"
	}
	if e.Reason != "" {
		what += ": " + e.Reason
	}
	return fmt.Sprintf("endpoint: %d message(s) to %s/%s/%s refused (%s)", e.Count, e.Peer, e.Service, e.Param, what)
}

// Unwrap returns ErrRefused.
func (e *RefusedError) Unwrap() error { return ErrRefused }

// Is reports a forged source's refusal as ErrSourceForged too.
func (e *RefusedError) Is(target error) bool {
	return target == ErrSourceForged && e.Code == RefusedForged
}

// LimitError reports a message over the receiving peer's size limit.
type LimitError struct {
	Peer  peer.ID
	Size  int64 // the message's encoded size
	Limit int64 // the largest message the peer accepts
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("endpoint: message of %d bytes over %s's limit of %d bytes", e.Size, e.Peer, e.Limit)
}

// Unwrap returns ErrTooLarge.
func (e *LimitError) Unwrap() error { return ErrTooLarge }

// Refuse tells the sender that the message was not taken, with a short
// reason (at most MaxReasonLen bytes are sent). Call it from the listener,
// before it returns; the message then counts as refused, not delivered,
// and the sender's next Send to the same destination or its Flush reports
// it (ErrRefused). A listener that held the message (Hold) and then
// refuses it must call Unhold itself.
func (d *Delivery) Refuse(reason string) {
	d.refused = RefusedByListener
	d.reason = reason
}

// hello is the record a receiver writes first on each stream.
func (s *Service) hello() []byte {
	b := []byte{recHello}
	b = binary.AppendUvarint(b, backVersion)
	return binary.AppendUvarint(b, uint64(s.opts.maxMessage))
}

// refusal is a refusal record's content.
type refusal struct {
	code                   byte
	service, param, reason string
}

// refuse gathers the refusal of a message to service/param for the
// sender, as the one byte recSame if it is the stream's previous refusal
// again, and writes what is gathered once it reaches maxBackBatch.
func (in *inStream) refuse(code byte, service, param, reason string) {
	r := refusal{code, service, param, cutReason(reason)}
	if in.refused && in.lastRefusal == r {
		in.back = append(in.back, recSame)
	} else {
		in.back = appendRefusal(in.back, code, service, param, r.reason)
		in.lastRefusal, in.refused = r, true
	}
	if len(in.back) >= maxBackBatch {
		in.writeBack()
	}
}

// appendRefusal appends a refusal record.
func appendRefusal(b []byte, code byte, service, param, reason string) []byte {
	b = append(b, recRefusal, code)
	for _, s := range []string{service, param, cutReason(reason)} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// cutReason cuts a reason to MaxReasonLen bytes, not a character in two.
func cutReason(reason string) string {
	if len(reason) > MaxReasonLen {
		reason = reason[:MaxReasonLen]
		for !utf8.ValidString(reason) {
			reason = reason[:len(reason)-1]
		}
	}
	return reason
}

// writeBack writes the refusals gathered; a sender that does not take
// them within backWriteTimeout has its stream reset (backFailed).
func (in *inStream) writeBack() {
	if len(in.back) == 0 {
		return
	}
	in.write(in.back)
	in.back = in.back[:0]
}

// write writes rec on the back channel, unless a write failed before; one
// that fails resets the stream, unless the reader has ended it: a
// going-away record written as the stream closes fails on the closed
// stream, and a reset then would tell a sender whose stream ended well
// (its Flush answered) that it may have lost messages (on QUIC, CI).
func (in *inStream) write(rec []byte) {
	in.backMu.Lock()
	defer in.backMu.Unlock()
	if in.backFailed.Load() {
		return
	}
	if err := writeBack(in.st, rec); err != nil {
		in.backFailed.Store(true)
		if !in.ended.Load() {
			in.st.Reset()
		}
	}
}

// greet writes the hello, and the going-away record after it if the
// service is shutting down: Shutdown found the stream before it was
// greeted.
func (in *inStream) greet() error {
	in.backMu.Lock()
	defer in.backMu.Unlock()
	if err := writeBack(in.st, in.svc.hello()); err != nil {
		return err
	}
	in.greeted = true
	if in.svc.draining.Load() {
		in.goneAway = true
		if err := writeBack(in.st, []byte{recGoAway}); err != nil {
			return err
		}
	}
	return nil
}

// goAway asks the sender to end the stream (Shutdown), once.
func (in *inStream) goAway() {
	in.backMu.Lock()
	ask := in.greeted && !in.goneAway
	in.goneAway = true
	in.backMu.Unlock()
	if ask {
		in.write([]byte{recGoAway})
	}
}

// writeBack writes a record to the stream's sender, within
// backWriteTimeout.
func writeBack(st network.Stream, rec []byte) error {
	st.SetWriteDeadline(time.Now().Add(backWriteTimeout))
	_, err := st.Write(rec)
	return err
}

// backRecord is one record read from the back channel.
type backRecord struct {
	kind                   byte
	version, max           uint64
	code                   byte
	service, param, reason string
}

// readBackRecord reads one record, refusing anything malformed or over
// the bounds: the receiver may be hostile too.
func readBackRecord(r *bufio.Reader) (backRecord, error) {
	var rec backRecord
	kind, err := r.ReadByte()
	if err != nil {
		return rec, err // io.EOF: the clean end
	}
	rec.kind = kind
	switch kind {
	case recHello:
		if rec.version, err = binary.ReadUvarint(r); err == nil {
			rec.max, err = binary.ReadUvarint(r)
		}
		if err == nil && (rec.version == 0 || rec.max == 0) {
			err = errors.New("hello with a zero version or limit")
		}
	case recSame, recGoAway:
	case recRefusal:
		if rec.code, err = r.ReadByte(); err != nil {
			break
		}
		if rec.code != RefusedNoListener && rec.code != RefusedByListener && rec.code != RefusedForged {
			err = fmt.Errorf("unknown refusal code %d", rec.code)
			break
		}
		if rec.service, err = readBackString(r, MaxNameLen); err != nil {
			break
		}
		if rec.param, err = readBackString(r, MaxNameLen); err != nil {
			break
		}
		rec.reason, err = readBackString(r, MaxReasonLen)
	default:
		err = fmt.Errorf("unknown record %#x", kind)
	}
	if err != nil {
		return rec, fmt.Errorf("%w: back channel: %v", ErrFrame, unexpectedEOF(err))
	}
	return rec, nil
}

func readBackString(r *bufio.Reader, limit int) (string, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return "", err
	}
	if n > uint64(limit) {
		return "", fmt.Errorf("string of %d bytes over %d", n, limit)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// back is the sender's side of one stream's back channel: a goroutine
// reads the receiver's records into it until the stream ends.
type back struct {
	hello chan struct{} // closed once the hello arrived (or the stream ended)
	done  chan struct{} // closed when the stream's back channel ended
	max   atomic.Int64  // the receiver's limit, once known
	err   error         // why it ended, if not at a clean end of stream; set before done closes
}

// startBack starts reading st's back channel.
func (snd *sender) startBack(st network.Stream) *back {
	b := &back{hello: make(chan struct{}), done: make(chan struct{})}
	s := snd.svc
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(b.done)
		defer snd.streamEnded(st)
		helloed, goingAway := false, false
		var last backRecord // the last refusal, kind 0 before one
		defer func() {
			if !helloed {
				close(b.hello)
			}
		}()
		r := bufio.NewReaderSize(st, 512)
		for {
			rec, err := readBackRecord(r)
			if err != nil {
				// Only a bare io.EOF is the receiver's end of stream:
				// a connection that dies resets its streams with an
				// error that wraps io.EOF ("connection closed: EOF").
				if err != io.EOF {
					b.err = err
					if errors.Is(err, ErrFrame) {
						st.Reset() // a receiver that lies about its answers
					}
				}
				return
			}
			switch {
			case rec.kind == recHello && !helloed:
				b.max.Store(int64(min(rec.max, 1<<40)))
				helloed = true
				close(b.hello)
			case rec.kind == recRefusal && helloed:
				snd.addRefusal(rec)
				last = rec
			case rec.kind == recSame && last.kind == recRefusal:
				snd.addRefusal(last)
			case rec.kind == recGoAway && helloed:
				if !goingAway {
					goingAway = true
					s.wg.Add(1) // under the back goroutine's own count
					go func() {
						defer s.wg.Done()
						snd.endGoingAway(st, b)
					}()
				}
			default:
				b.err = fmt.Errorf("%w: back channel: record %q out of order", ErrFrame, rec.kind)
				st.Reset()
				return
			}
		}
	}()
	return b
}

// refusals are the refusals a sender has received and not yet reported.
type refusals struct {
	mu    sync.Mutex
	any   atomic.Bool // whether byKey or other holds anything
	byKey map[listenerKey]*RefusedError
	other *RefusedError // the sum over destinations beyond maxRefusalKeys
}

func (snd *sender) addRefusal(rec backRecord) {
	snd.svc.stats.refusalsReceived.Add(1)
	r := &snd.refused
	r.mu.Lock()
	defer r.mu.Unlock()
	k := listenerKey{rec.service, rec.param}
	e := r.byKey[k]
	if e == nil {
		if r.byKey == nil {
			r.byKey = map[listenerKey]*RefusedError{}
		}
		if len(r.byKey) < maxRefusalKeys {
			e = &RefusedError{Peer: snd.peer, Service: rec.service, Param: rec.param}
			r.byKey[k] = e
		} else {
			if r.other == nil {
				r.other = &RefusedError{Peer: snd.peer}
			}
			e = r.other
		}
	}
	e.Count++
	e.Code, e.Reason = int(rec.code), rec.reason
	r.any.Store(true)
}

// takeRefusal returns and forgets the refusals for one destination.
func (snd *sender) takeRefusal(service, param string) error {
	r := &snd.refused
	if !r.any.Load() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.byKey[listenerKey{service, param}]
	if e == nil {
		return nil
	}
	delete(r.byKey, listenerKey{service, param})
	r.any.Store(len(r.byKey) > 0 || r.other != nil)
	return e
}

// takeRefusals returns and forgets all refusals, joined.
func (snd *sender) takeRefusals() error {
	r := &snd.refused
	if !r.any.Load() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, e := range r.byKey {
		errs = append(errs, e)
	}
	if r.other != nil {
		errs = append(errs, r.other)
	}
	clear(r.byKey)
	r.other = nil
	r.any.Store(false)
	return joinerr.Join(errs...)
}

// peerLimit returns the receiver's message limit for a message of size
// bytes on the current stream, waiting for the hello when the message is
// large enough to matter; 0 means not known (yet).
func (snd *sender) peerLimit(ctx context.Context, g *SendGroup, size int64) (int64, error) {
	b := snd.back
	if b == nil {
		return 0, nil
	}
	if size >= helloWait {
		select {
		case <-b.hello:
		case <-ctx.Done():
			return 0, fmt.Errorf("endpoint: sending to %s: %w", snd.peer, ctx.Err())
		case <-snd.svc.ctx.Done(): // Close waits for the token this Send holds
			return 0, fmt.Errorf("endpoint: sending to %s: %w", snd.peer, ErrClosed)
		case <-g.done():
			return 0, fmt.Errorf("endpoint: sending to %s: %w", snd.peer, ErrGroupClosed)
		}
	}
	return b.max.Load(), nil
}
