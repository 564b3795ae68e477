package endpoint

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/internal/joinerr"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// How a message leaves.
//
// A small message (smallMax bytes of element data or less) is encoded
// straight into its peer's queue. When the stream is idle (nothing queued,
// no write in progress, no backlog), its Send then writes it at once, so
// a lone message costs no hand-off. Otherwise Send returns with the
// message queued, accepted, and a flusher goroutine, started when the
// queue stops being empty and gone once it is empty again, writes the
// whole queue in one Write, and again with whatever queued during that
// write: messages sent while a write is in progress leave together in the
// next (natural batching; nothing waits for a timer). A Send whose own
// write had to wait for the stream's writer marks a backlog (see
// writeDirect), which sends the following messages through the queue
// until the flusher empties it. Concurrent Sends to one peer share the
// queue; order per destination is the order in which Sends were accepted.
//
// A large message is written by its Send, straight from the caller's
// memory, after whatever is queued before it.
//
// The queue holds at most pendMax bytes; a Send that finds it full waits
// until the flusher takes it and its turn comes (takeLocked), or until its
// ctx ends, and then its message is not sent. So backpressure is what it was: a slow receiver stalls the
// flusher's write, the queue fills, and Sends wait.

// smallMax bounds the element data of a message that is queued; larger
// messages are written by their Send, their large elements straight from
// the caller's memory.
const smallMax = 16 << 10

// pendMax bounds the bytes queued for one peer and not yet written. A
// batch this large amortizes a write's fixed cost (a yamux frame, TLS
// records, a system call on each side) over a thousand 100-byte messages,
// and it keeps what a peer that stops reading can make the sender hold,
// beyond the stream's flow-control window, at 128 KiB.
const pendMax = 128 << 10

// smallMessage reports whether m is queued rather than written by its
// Send. A nil message is not: the large path's wire.Size refuses it
// before anything is written.
func smallMessage(m *message.Message) bool {
	if m == nil {
		return false
	}
	n := 0
	for _, e := range m.Elements() {
		if n += len(e.Data); n > smallMax || e.Signature != nil {
			return false
		}
	}
	return true
}

// sender owns the outgoing stream to one peer.
type sender struct {
	svc  *Service
	peer peer.ID

	// lock (capacity 1) is the writer's token: whoever holds it writes to
	// the stream or replaces it (the flusher, a Send opening the stream
	// or writing a large message, Flush, close, retire). Unlike a mutex,
	// waiting for it honours ctx. The fields up to mu are used with it
	// held.
	lock chan struct{}
	// deadline is the write deadline last set on st.
	deadline time.Time
	watch    watch // ctx's end interrupts a stalled write

	// mu guards what follows; it is never held across a write. st and
	// back change only with the token held too.
	mu   sync.Mutex
	st   network.Stream
	back *back // reads st's back channel (refuse.go)
	// pend holds the frames of small messages accepted and not yet
	// written, in order; spare is the previous batch's buffer, for the
	// next. Invariant: pend is empty while st is nil. Both are dropped
	// when the stream ends with nothing queued (Flush, a failed write,
	// the back channel's end): a sender kept for a peer no longer sent
	// to holds no buffer.
	pend, spare []byte
	flushing    bool // a flusher runs, or is about to
	// waiters are the Sends waiting for room in pend, oldest first, each
	// woken by closing its channel; filled says one found pend full since
	// it was last taken (takeLocked).
	waiters []chan struct{}
	filled  bool
	// unacked counts messages accepted on st since it opened or was
	// flushed, and dests holds their destinations; lost records that a
	// stream with such messages was reset, for the next Flush to report
	// (lostDests: theirs), and failed why, for the next Send.
	unacked   int
	dests     dests
	lost      bool
	lostDests dests
	failed    error
	closed    bool
	// dead says the sender was retired from the table (retire.go) and
	// sends nothing more: a Send or Flush holding it looks the peer up
	// again (errRetired).
	dead bool
	// backlog says Sends queue for the flusher rather than write
	// themselves; fastest is the fastest direct write on st.
	backlog bool
	fastest time.Duration
	refused refusals // reported by the back channel
	// writer is the group of the Send whose direct or large write is in
	// progress, for the group's Close to interrupt (SendGroup); nil
	// when none is or the Send has none.
	writer *SendGroup
	// last is the destination of the last frame in pend, which the next
	// frame to the same destination does not name again. A batch's first
	// frame names its own: a batch is written whole or its stream reset,
	// except one Send's frame, which is dropped unwritten when its ctx
	// ends first, and no later frame may depend on that.
	last lastDest
}

// lastDest is the destination of a queue's last frame; ok is false while
// the queue is empty.
type lastDest struct {
	service, param string
	ok             bool
}

// next reports whether a frame to (service, param) repeats the last
// destination, and makes it the last.
func (l *lastDest) next(service, param string) (same bool) {
	same = l.ok && l.service == service && l.param == param
	*l = lastDest{service, param, true}
	return same
}

func newSender(s *Service, p peer.ID) *sender {
	return &sender{svc: s, peer: p, lock: make(chan struct{}, 1)}
}

// acquire takes the token, or fails when ctx ends or g closes first.
func (snd *sender) acquire(ctx context.Context, g *SendGroup, op string) error {
	select {
	case snd.lock <- struct{}{}: // uncontended: no wait on ctx to set up
		return nil
	default:
	}
	select {
	case snd.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("endpoint: %s %s: %w", op, snd.peer, ctx.Err())
	case <-g.done():
		return fmt.Errorf("endpoint: %s %s: %w", op, snd.peer, ErrGroupClosed)
	}
}

func (snd *sender) release() { <-snd.lock }

func (snd *sender) send(ctx context.Context, g *SendGroup, service, param string, m *message.Message) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("endpoint: sending to %s: %w", snd.peer, err)
	}
	if err := snd.takeRefusal(service, param); err != nil {
		return err
	}
	if !smallMessage(m) {
		return snd.sendLarge(ctx, g, service, param, m)
	}
	woken := false // by a batch taken: a failure passes the wake on
	for {
		snd.mu.Lock()
		if err := snd.checkLocked(); err != nil {
			if woken {
				snd.passOnLocked()
			}
			snd.mu.Unlock()
			return err
		}
		if snd.st == nil {
			if woken {
				snd.passOnLocked()
				woken = false
			}
			snd.mu.Unlock()
			if err := snd.acquire(ctx, g, "sending to"); err != nil {
				return err
			}
			err := snd.open(ctx, g)
			snd.release()
			if err != nil {
				return err
			}
			continue
		}
		start, last := len(snd.pend), snd.last
		pend, size, err := appendFrame(snd.pend, snd.last.next(service, param), service, param, m)
		if err == nil {
			if limit := snd.back.max.Load(); limit > 0 && size > limit {
				err = &LimitError{Peer: snd.peer, Size: size, Limit: limit}
			}
		}
		if err != nil {
			snd.pend, snd.last = pend[:start], last
			if woken {
				snd.passOnLocked()
			}
			snd.mu.Unlock()
			return err
		}
		if len(pend) > pendMax && start > 0 {
			// Full: wait until the flusher takes the queue.
			snd.pend, snd.last = pend[:start], last
			w := make(chan struct{})
			snd.waiters, snd.filled = append(snd.waiters, w), true
			snd.mu.Unlock()
			select {
			case <-w:
				woken = true
				continue
			case <-ctx.Done():
				err = fmt.Errorf("endpoint: sending to %s: %w (not sent)", snd.peer, ctx.Err())
			case <-g.done():
				err = fmt.Errorf("endpoint: sending to %s: %w (not sent)", snd.peer, ErrGroupClosed)
			}
			snd.leave(w)
			return err
		}
		snd.pend = pend
		snd.unacked++
		snd.dests.add(service, param)
		if start == 0 && !snd.flushing && !snd.backlog {
			// An idle stream: write the message now, from this
			// goroutine, rather than hand it to a flusher.
			select {
			case snd.lock <- struct{}{}:
				batch, st := snd.takeLocked()
				g.write(snd)
				snd.mu.Unlock()
				return snd.writeDirect(ctx, g, st, batch)
			default: // a writer is busy: queue behind it
			}
		}
		if !snd.flushing {
			snd.flushing = true
			snd.svc.wg.Add(1) // under mu: close, which Service.Close waits for, cannot have passed
			go snd.flushLoop()
		}
		snd.mu.Unlock()
		return nil
	}
}

// writeDirect writes one Send's frame, with the token held, and releases
// the token. A write that took more than backlogFactor times the fastest
// on this stream waited for the stream's own writer (yamux's), which is
// then busy: from there on Sends queue and a flusher batches, until it
// finds the queue empty. So a sender alone writes at once, and a sender
// in a loop, which fills the stream's writer within a few dozen messages,
// batches.
func (snd *sender) writeDirect(ctx context.Context, g *SendGroup, st network.Stream, batch []byte) error {
	defer snd.release()
	err := snd.watch.prepare(ctx, st, &snd.deadline)
	if err == nil && g.isClosed() { // closed before it could interrupt the write
		err = ErrGroupClosed
	}
	if err != nil {
		snd.mu.Lock()
		snd.unacked-- // taken back: not written
		snd.writer = nil
		if snd.spare == nil {
			snd.spare = batch[:0]
		}
		snd.mu.Unlock()
		return fmt.Errorf("endpoint: sending to %s: %w (not sent)", snd.peer, err)
	}
	t := time.Now()
	n, err := writeChunks(st, batch)
	d := time.Since(t)
	snd.mu.Lock()
	defer snd.mu.Unlock()
	snd.writer = nil
	if snd.spare == nil {
		snd.spare = batch[:0]
	}
	// The write deadline is ctx's: its timer can fire before ctx's own.
	cerr := ctxDone(ctx, err)
	if cerr == nil {
		cerr = g.cut(err)
	}
	if cerr != nil && snd.st == st {
		if n == 0 {
			// ctx ended before a byte left: the stream is intact and
			// the message not sent.
			snd.unacked--
			return fmt.Errorf("endpoint: sending to %s: %w (not sent)", snd.peer, cerr)
		}
		// Part of the frame left: the rest goes first in the queue,
		// for the flusher, and the message counts as accepted, as it
		// would had it been queued in the first place.
		rest := append(make([]byte, 0, len(batch)-n+len(snd.pend)), batch[n:]...)
		snd.pend = append(rest, snd.pend...)
		snd.backlog = true
		if !snd.flushing {
			snd.flushing = true
			snd.svc.wg.Add(1)
			go snd.flushLoop()
		}
		return nil
	}
	if err != nil {
		if snd.st == st {
			snd.failLocked(err, false)
		}
		return snd.writeErrLocked(ctx, g, st, err)
	}
	if snd.fastest == 0 || d < snd.fastest {
		snd.fastest = d
	}
	if d > backlogFactor*snd.fastest {
		snd.backlog = true
	}
	return nil
}

// ctxDone returns ctx's error if a write that failed with err was cut
// short by ctx: ctx ended, or the write deadline prepare set from ctx's
// deadline passed (its timer may fire first).
func ctxDone(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	var te interface{ Timeout() bool }
	if dl, ok := ctx.Deadline(); ok && errors.As(err, &te) && te.Timeout() && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// backlogFactor is how much slower than the fastest write on a stream a
// direct write must be to count as having waited (see writeDirect): an
// unhindered write to a yamux stream copies the frame and hands it over
// (well under a microsecond here), one that waits for yamux's writer
// takes a TLS record and a system call (several microseconds); a factor
// of 4 tells the two apart with room for a cache miss or two.
const backlogFactor = 4

// checkLocked fails a Send on a closed sender, or once after the flusher
// lost the stream (messages accepted earlier may be lost).
func (snd *sender) checkLocked() error {
	if snd.closed {
		return ErrClosed
	}
	if snd.dead {
		return errRetired
	}
	if err := snd.failed; err != nil {
		snd.failed = nil
		return err
	}
	return nil
}

// open opens the stream, with the token held, unless one is open.
func (snd *sender) open(ctx context.Context, g *SendGroup) error {
	snd.mu.Lock()
	open, dead := snd.st != nil, snd.dead
	snd.mu.Unlock()
	if dead {
		return errRetired // retired while this Send waited for the token
	}
	if open {
		return nil
	}
	// A peer that stalls the stream's negotiation holds it until ctx
	// ends, the service closes or g does.
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(snd.svc.ctx, cancel)
	defer stop()
	if g != nil {
		stopG := context.AfterFunc(g.ctx, cancel)
		defer stopG()
	}
	st, err := snd.svc.node.Host().NewStream(network.WithAllowLimitedConn(octx, "endpoint"), snd.peer, ProtocolID)
	if err != nil {
		if snd.svc.ctx.Err() != nil {
			return fmt.Errorf("endpoint: opening stream to %s: %w", snd.peer, ErrClosed)
		}
		if ctx.Err() == nil && g.isClosed() {
			return fmt.Errorf("endpoint: opening stream to %s: %w", snd.peer, ErrGroupClosed)
		}
		if ctx.Err() == nil && snd.svc.node.Host().Network().Connectedness(snd.peer) == network.NotConnected {
			return fmt.Errorf("endpoint: opening stream to %s: %w (%w)", snd.peer, ErrPeerGone, err)
		}
		return fmt.Errorf("endpoint: opening stream to %s: %w", snd.peer, err)
	}
	b := snd.startBack(st)
	snd.deadline = time.Time{}
	snd.mu.Lock()
	defer snd.mu.Unlock()
	if snd.closed {
		st.Reset()
		return ErrClosed
	}
	snd.st, snd.back = st, b
	snd.backlog, snd.fastest, snd.last = false, 0, lastDest{}
	return nil
}

// flushLoop is the flusher: it writes the queue until it is empty. When
// it first finds the queue empty it yields once before it gives up: a
// sender in a loop, descheduled while the flusher wrote, then queues its
// next messages for the same write instead of restarting direct writes
// of one message each (fewer writes, so fewer TLS records and system
// calls; BenchmarkPipeRate shows the difference). It costs a lone message
// nothing: that one was written directly.
func (snd *sender) flushLoop() {
	defer snd.svc.wg.Done()
	snd.lock <- struct{}{}
	defer snd.release()
	yielded := false
	for {
		snd.mu.Lock()
		if len(snd.pend) == 0 {
			if !yielded {
				snd.mu.Unlock()
				runtime.Gosched()
				yielded = true
				continue
			}
			snd.flushing, snd.backlog = false, false
			snd.mu.Unlock()
			return
		}
		yielded = false
		batch, st := snd.takeLocked()
		snd.mu.Unlock()
		// No ctx governs the flusher's writes: clear what a large
		// Send's ctx left on the stream.
		if snd.watch.prepare(context.Background(), st, &snd.deadline) != nil {
			// The sender is closing: what was taken goes back, for
			// close to drop with the stream (a reset, as for anything
			// else still queued).
			snd.mu.Lock()
			snd.pend = append(batch, snd.pend...)
			snd.flushing = false
			snd.mu.Unlock()
			return
		}
		snd.writeBatch(st, batch, true)
	}
}

// takeLocked takes the queue and wakes Sends waiting for room: the
// oldest alone if a Send found the queue full since it was last taken,
// else all.
//
// A queue that filled while the last batch was written was filled by
// Sends already running, such as senders in loops, which come back for
// more: they fill the room made now too, and every waiting Send woken
// besides would find the queue full again and wait anew, taking CPU from
// the stream's writer and, on one machine, from the receiver, for no
// message sent. A queue that did not fill has room for every Send
// waiting (Sends that come once, such as a burst of replies), which then
// leave in one batch. The oldest goes first: room is handed out in turn.
func (snd *sender) takeLocked() ([]byte, network.Stream) {
	batch := snd.pend
	snd.pend, snd.spare, snd.last = snd.spare[:0], nil, lastDest{}
	if n := len(snd.waiters); n > 0 {
		if snd.filled {
			n = 1
		}
		if testHookTake != nil {
			testHookTake(n)
		}
		for range n {
			snd.wakeLocked()
		}
	}
	snd.filled = false
	return batch, snd.st
}

// testHookTake, if set (by tests), runs with how many Sends a batch taken
// woke, when any waited.
var testHookTake func(woken int)

// wakeLocked wakes the oldest Send waiting for room.
func (snd *sender) wakeLocked() {
	if len(snd.waiters) > 0 {
		close(snd.waiters[0])
		snd.waiters[0] = nil
		snd.waiters = snd.waiters[1:]
	}
}

// passOnLocked is a woken Send's turn ending without a message queued
// (it failed, or its ctx ended): the next waiting Send is woken if the
// queue has room left, since no batch taken may come to wake it.
func (snd *sender) passOnLocked() {
	if len(snd.pend) < pendMax {
		snd.wakeLocked()
	}
}

// wakeAllLocked wakes every Send waiting for room: the stream ended.
func (snd *sender) wakeAllLocked() {
	for _, w := range snd.waiters {
		close(w)
	}
	snd.waiters = nil
}

// leave takes w, a Send's wait for room that its ctx or group ended,
// from the waiters; if it was woken meanwhile, the wake passes on.
func (snd *sender) leave(w chan struct{}) {
	snd.mu.Lock()
	defer snd.mu.Unlock()
	if i := slices.Index(snd.waiters, w); i >= 0 {
		snd.waiters = slices.Delete(snd.waiters, i, i+1)
		return
	}
	snd.passOnLocked()
}

// writeBatch writes frames taken from the queue to st, with the token
// held, and keeps the buffer for a later batch. A failed write resets
// the stream; async says whether the next Send is to report it.
func (snd *sender) writeBatch(st network.Stream, batch []byte, async bool) error {
	var err error
	if len(batch) > 0 {
		_, err = writeChunks(st, batch)
	}
	snd.mu.Lock()
	defer snd.mu.Unlock()
	if snd.spare == nil && cap(batch) <= 2*pendMax {
		snd.spare = batch[:0]
	}
	if err != nil && snd.st == st {
		snd.failLocked(err, async)
	}
	return err
}

// failLocked drops a stream that failed. Messages accepted on it since it
// opened or was flushed may be lost, the queued ones with them: the next
// Flush says so, and so does the next Send if no Send saw the failure.
//
// back stays until the next stream opens: retire waits for its end, after
// which no refusal can arrive.
func (snd *sender) failLocked(err error, async bool) {
	snd.st.Reset()
	snd.st = nil
	snd.pend, snd.spare = nil, nil
	snd.wakeAllLocked()
	if snd.unacked > 0 {
		snd.lost, snd.unacked = true, 0
		snd.lostDests.merge(snd.dests)
		if async {
			snd.failed = fmt.Errorf("%w: to %s: %w", ErrMaybeLost, snd.peer, err)
		}
	}
	snd.dests = dests{}
}

// testHookLargePrepare, if set (by tests), runs in sendLarge just before
// the write is prepared.
var testHookLargePrepare func()

// sendLarge writes a large message with the token held, after the queue.
func (snd *sender) sendLarge(ctx context.Context, g *SendGroup, service, param string, m *message.Message) error {
	size, err := wire.Size(m)
	if err != nil {
		return err
	}
	if err := snd.acquire(ctx, g, "sending to"); err != nil {
		return err
	}
	defer snd.release()
	snd.mu.Lock()
	err = snd.checkLocked()
	snd.mu.Unlock()
	if err != nil {
		return err
	}
	if err := snd.open(ctx, g); err != nil {
		return err
	}
	limit, err := snd.peerLimit(ctx, g, size)
	if err != nil {
		return err
	}
	if limit > 0 && size > limit {
		return &LimitError{Peer: snd.peer, Size: size, Limit: limit}
	}
	// The stream changes only with the token, which this Send holds.
	snd.mu.Lock()
	st := snd.st
	g.write(snd)
	snd.mu.Unlock()
	defer func() {
		snd.mu.Lock()
		snd.writer = nil
		snd.mu.Unlock()
	}()
	// Cancelling ctx, or closing g, unblocks a write stalled by a slow
	// receiver.
	if testHookLargePrepare != nil {
		testHookLargePrepare()
	}
	err = snd.watch.prepare(ctx, st, &snd.deadline)
	if err == nil && g.isClosed() {
		err = ErrGroupClosed
	}
	if err != nil {
		return fmt.Errorf("endpoint: sending to %s: %w", snd.peer, err)
	}
	snd.mu.Lock()
	batch, _ := snd.takeLocked()
	snd.mu.Unlock()
	if err = snd.writeBatch(st, batch, false); err == nil {
		err = writeLarge(st, service, param, size, m)
		snd.mu.Lock()
		if err != nil && snd.st == st {
			snd.failLocked(err, false)
		} else if err == nil {
			snd.unacked++
			snd.dests.add(service, param)
		}
		snd.mu.Unlock()
	}
	if err != nil {
		snd.mu.Lock()
		defer snd.mu.Unlock()
		return snd.writeErrLocked(ctx, g, st, err)
	}
	return nil
}

// writeErrLocked is the error of a Send whose write on st failed with
// err: it names ctx's end, the service's Close, or the peer's going away
// when one of them cut the write short, so that callers can match them
// (errors.Is) rather than the stream's own errors.
func (snd *sender) writeErrLocked(ctx context.Context, g *SendGroup, st network.Stream, err error) error {
	if cerr := ctxDone(ctx, err); cerr != nil {
		return fmt.Errorf("endpoint: sending to %s: %w (%w)", snd.peer, cerr, err)
	}
	if cerr := g.cut(err); cerr != nil {
		return fmt.Errorf("endpoint: sending to %s: %w (%w)", snd.peer, cerr, err)
	}
	if snd.closed {
		return fmt.Errorf("endpoint: sending to %s: %w (%w)", snd.peer, ErrClosed, err)
	}
	// A write ends with io.EOF when the connection's session ended
	// because the peer closed the connection under it, which go-yamux
	// reports to every stream: the peer went away as surely as when its
	// side reset the stream.
	// A write that races the end of the connection's session gets the
	// error that ended the session itself ("read: connection reset by
	// peer" when the peer's process was killed): go-yamux hands it out
	// before it resets the session's streams. The connection is closed
	// then, and so lost under the stream.
	if errors.Is(err, network.ErrReset) || errors.Is(err, io.EOF) || (st != nil && st.Conn().IsClosed()) {
		return fmt.Errorf("endpoint: sending to %s: %w (%w)", snd.peer, ErrPeerGone, err)
	}
	return fmt.Errorf("endpoint: sending to %s: %w", snd.peer, err)
}

// writeChunks writes b to st in writes no larger than node.WriteChunk
// says, so that on a slow link the receiver sees each part of a frame as
// it arrives: a receiver's frame watchdog (WithFrameTimeout) counts only
// what its stream hands on, and yamux hands on nothing of a frame until
// all of it has come, up to 64 KiB when a write is not bounded. Writes
// of up to smallWrite bytes, the small-message path's, go straight.
func writeChunks(st network.Stream, b []byte) (int, error) {
	if len(b) <= smallWrite {
		return st.Write(b)
	}
	chunk := node.WriteChunk(st.Conn())
	if chunk <= 0 {
		return st.Write(b)
	}
	n := 0
	for len(b) > chunk {
		k, err := st.Write(b[:chunk])
		n += k
		if err != nil {
			return n, err
		}
		b = b[chunk:]
	}
	k, err := st.Write(b)
	return n + k, err
}

// smallWrite is a write that needs no bound: node.WriteChunk, when it
// bounds writes, allows 16 KiB less a yamux header (12 bytes).
const smallWrite = 16<<10 - 12

// chunkWriter is a stream written through writeChunks.
type chunkWriter struct{ st network.Stream }

func (w chunkWriter) Write(b []byte) (int, error) { return writeChunks(w.st, b) }

// largeWriter writes a large message's frame: its header and small
// elements gathered in w, its large elements straight from the caller's
// memory. Pooled: a sender keeps none between its large messages, so the
// senders of a node that sent large messages to many peers hold nothing.
type largeWriter struct {
	w   *bufio.Writer
	enc *wire.Encoder
	hdr []byte
}

var largeWriters = sync.Pool{New: func() any {
	lw := &largeWriter{w: bufio.NewWriterSize(nil, 32<<10)}
	lw.enc = wire.NewEncoder(lw.w)
	return lw
}}

// writeLarge writes the frame of a message of size bytes to st.
func writeLarge(st network.Stream, service, param string, size int64, m *message.Message) error {
	lw := largeWriters.Get().(*largeWriter)
	defer largeWriters.Put(lw)
	lw.w.Reset(chunkWriter{st})
	defer lw.w.Reset(nil) // drops st, and whatever a failed write left
	h := binary.AppendUvarint(appendDest(lw.hdr[:0], false, service, param), uint64(size))
	lw.hdr = h
	if _, err := lw.w.Write(h); err != nil {
		return err
	}
	if err := lw.enc.Encode(m); err != nil {
		return err
	}
	return lw.w.Flush()
}

// appendFrame appends m's frame to b and returns the message's size; same
// says the frame goes where the stream's previous frame went. The
// header's length field needs that size, so the message is encoded first,
// behind room for the longest header, and then moved down to its header:
// the message is planned once, and the move costs less than a second
// plan.
func appendFrame(b []byte, same bool, service, param string, m *message.Message) ([]byte, int64, error) {
	start := len(b)
	fixed := 1
	if !same {
		fixed = uvarintLen(len(service)+1) + len(service) + uvarintLen(len(param)) + len(param)
	}
	room := fixed + binary.MaxVarintLen64
	b = slices.Grow(b, room+256)[:start+room]
	b, err := wire.Append(b, m)
	if err != nil {
		return b[:start], 0, err
	}
	size := len(b) - start - room
	hl := fixed + uvarintLen(size)
	copy(b[start+hl:], b[start+room:])
	binary.AppendUvarint(appendDest(b[start:start], same, service, param), uint64(size))
	return b[:start+hl+size], int64(size), nil
}

// appendDest appends a frame's destination: 0 if it repeats the stream's
// previous frame's, else the service's length plus one, the service, the
// param's length and the param (see the package doc).
func appendDest(h []byte, same bool, service, param string) []byte {
	if same {
		return append(h, 0)
	}
	h = binary.AppendUvarint(h, uint64(len(service))+1)
	h = append(h, service...)
	h = binary.AppendUvarint(h, uint64(len(param)))
	return append(h, param...)
}

func uvarintLen(n int) int {
	k := 1
	for ; n >= 0x80; n >>= 7 {
		k++
	}
	return k
}

// Flush waits until every message sent to p so far has been read by p and
// handed to its listeners, or ctx ends. It ends the stream that carried them
// (the next Send opens a new one), so use it before exiting or when an
// acknowledgement matters, not after every message. If a stream that carried
// messages whose Send had succeeded was reset since the last Flush (a failed
// or cancelled Send, or a failed write of queued messages), those may be
// lost: Flush then fails with a *LostError (ErrMaybeLost) naming their
// destinations, once, after flushing the rest; so does a Flush that fails
// once it has begun to end the stream (its ctx ends, the stream or the
// service fails), as no later Flush knows of what it was to vouch for. If p
// refused messages sent to it since they were last reported (see Send),
// Flush fails with their RefusedErrors, joined, and forgets them. Once the
// service is closed (which drops what was queued, and ends a Flush waiting),
// Flush fails with ErrClosed.
func (s *Service) Flush(ctx context.Context, p peer.ID) error {
	for {
		s.mu.Lock()
		if s.closed { // Close dropped what was queued: nothing to vouch for
			s.mu.Unlock()
			return fmt.Errorf("endpoint: flushing to %s: %w", p, ErrClosed)
		}
		snd := s.senders[p]
		var rep *report
		if snd == nil {
			rep = s.takeReportLocked(p)
		}
		s.mu.Unlock()
		if snd == nil {
			return rep.err(p)
		}
		if err := snd.flush(ctx); err != errRetired {
			return err
		}
	}
}

// flush is Flush on snd; it fails with errRetired if snd was retired.
func (snd *sender) flush(ctx context.Context) error {
	p := snd.peer
	if err := snd.acquire(ctx, nil, "flushing to"); err != nil {
		return err
	}
	defer snd.release()
	snd.mu.Lock()
	if snd.dead {
		snd.mu.Unlock()
		return errRetired
	}
	if snd.closed { // Close dropped what was queued while this Flush waited
		lost, lostDests := snd.lost, snd.lostDests
		snd.mu.Unlock()
		err := fmt.Errorf("endpoint: flushing to %s: %w", p, ErrClosed)
		if lost {
			err = fmt.Errorf("endpoint: flushing to %s: %w (%w)", p, ErrClosed, lostDests.lostError(p))
		}
		return joinerr.Join(err, snd.takeRefusals())
	}
	lost, lostDests := snd.lost, snd.lostDests
	snd.lost, snd.lostDests, snd.failed = false, dests{}, nil // reported here
	batch, st := snd.takeLocked()
	b := snd.back
	// onStream are the destinations of the messages this Flush vouches
	// for on st, those whose loss it reports if it fails.
	onStream := lostDests
	if st != nil {
		// The stream ends here, and its buffers with it. (Without a
		// stream, back is that of one that failed: retire waits for
		// its end.)
		onStream.merge(snd.dests)
		snd.st, snd.back, snd.unacked, snd.dests = nil, nil, 0, dests{}
		snd.pend, snd.spare = nil, nil
	}
	snd.mu.Unlock()
	maybeLost := func() error {
		var err error
		if lost {
			err = lostDests.lostError(p)
		}
		return joinerr.Join(err, snd.takeRefusals())
	}
	if st == nil {
		return maybeLost()
	}
	// A receiver that never ends its side holds the Flush until ctx ends,
	// or the service closes (Close waits for the token it holds).
	stop := context.AfterFunc(ctx, func() { st.Reset() })
	defer stop()
	stopSvc := context.AfterFunc(snd.svc.ctx, func() { st.Reset() })
	defer stopSvc()
	// The queue's frames go first, without a deadline left by a Send.
	var err error
	if err = snd.watch.prepare(context.Background(), st, &snd.deadline); err == nil && len(batch) > 0 {
		_, err = writeChunks(st, batch)
	}
	// The reader closes its side once it has read up to our end of
	// stream, and it delivers each message before reading the next.
	if err == nil {
		err = st.CloseWrite()
	}
	if err != nil {
		st.Reset()
		if cerr := ctx.Err(); cerr != nil {
			err = cerr
		}
		return joinerr.Join(fmt.Errorf("endpoint: flushing to %s: %w (%w)", p, err, onStream.lostError(p)), snd.takeRefusals())
	}
	// The back channel reads until the receiver's end of stream, which
	// comes after the refusals of everything it read.
	<-b.done
	if b.err != nil {
		// The stream is reset under messages the receiver may not have
		// handed over, and under any lost before: no later Flush knows
		// of them.
		st.Reset()
		cause := b.err
		if cerr := ctx.Err(); cerr != nil {
			cause = cerr
		} else if snd.svc.ctx.Err() != nil {
			cause = ErrClosed
		}
		return joinerr.Join(fmt.Errorf("endpoint: flushing to %s: %w (%w)", p, cause, onStream.lostError(p)), snd.takeRefusals())
	}
	st.Close()
	return maybeLost()
}

// pastDeadline is a write deadline that has passed.
var pastDeadline = time.Unix(1, 0)

// drain writes what is queued, with the token held, until ctx ends.
func (snd *sender) drain(ctx context.Context) {
	if snd.acquire(ctx, nil, "draining to") != nil {
		return
	}
	defer snd.release()
	snd.mu.Lock()
	batch, st := snd.takeLocked()
	snd.mu.Unlock()
	if st == nil {
		return
	}
	if snd.watch.prepare(ctx, st, &snd.deadline) == nil {
		snd.writeBatch(st, batch, true)
	}
}

// close ends sending to the peer at once: a write in progress is
// interrupted, and what is still queued is dropped with the stream (the
// next Flush would have reported it; Shutdown drains the queues first).
func (snd *sender) close() {
	snd.mu.Lock()
	snd.closed = true
	snd.wakeAllLocked()
	snd.watch.close(snd.st)
	snd.mu.Unlock()
	snd.lock <- struct{}{}
	snd.watch.disarm()
	snd.mu.Lock()
	if snd.st != nil {
		if len(snd.pend) > 0 {
			snd.st.Reset()
		} else {
			snd.st.Close()
		}
		snd.st, snd.back, snd.pend = nil, nil, nil
	}
	snd.mu.Unlock()
	<-snd.lock
}
