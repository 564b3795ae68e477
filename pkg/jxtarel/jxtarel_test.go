package jxtarel_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/p2pmsg/p2pmsg/pkg/jxtarel"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func isErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}

func equal(t testing.TB, want, got any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func check(t testing.TB, ok bool, what string) {
	t.Helper()
	if !ok {
		t.Fatal(what)
	}
}

// link carries messages from one Conn to another through a goroutine,
// as a transport would, losing, duplicating and reordering some of them.
type link struct {
	mu       sync.Mutex
	rng      *rand.Rand
	loss     float64 // probability a message is lost
	dup      float64 // probability it is delivered twice
	reorder  float64 // probability it is held back behind the next
	held     *message.Message
	to       func() *jxtarel.Conn
	q        chan *message.Message
	messages int
	stopped  bool
	wg       sync.WaitGroup
}

func newLink(seed uint64, loss, dup, reorder float64) *link {
	return &link{rng: rand.New(rand.NewPCG(seed, 1)), loss: loss, dup: dup, reorder: reorder, q: make(chan *message.Message, 4096)}
}

func (l *link) send(ctx context.Context, m *message.Message) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return nil
	}
	l.messages++
	if l.rng.Float64() < l.loss {
		return nil
	}
	out := []*message.Message{m}
	if l.rng.Float64() < l.dup {
		out = append(out, m)
	}
	if l.held != nil {
		out = append(out, l.held)
		l.held = nil
	} else if l.rng.Float64() < l.reorder {
		// held back behind the next message, or for 2 ms at most
		l.held, out = m, out[1:]
		time.AfterFunc(2*time.Millisecond, func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.held == m && !l.stopped {
				l.held = nil
				l.q <- m
			}
		})
	}
	for _, o := range out {
		select {
		case l.q <- o:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (l *link) run() {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for m := range l.q {
			l.to().Handle(m)
		}
	}()
}

func (l *link) stop() {
	l.mu.Lock()
	l.stopped = true
	close(l.q)
	l.mu.Unlock()
	l.wg.Wait()
}

// pair connects two Conns through links a→b and b→a.
func pair(t *testing.T, ab, ba *link, opts ...jxtarel.Option) (a, b *jxtarel.Conn) {
	t.Helper()
	var err error
	a, err = jxtarel.New(ab.send, opts...)
	noErr(t, err)
	b, err = jxtarel.New(ba.send, opts...)
	noErr(t, err)
	ab.to, ba.to = func() *jxtarel.Conn { return b }, func() *jxtarel.Conn { return a }
	ab.run()
	ba.run()
	t.Cleanup(func() {
		a.Close()
		b.Close()
		ab.stop()
		ba.stop()
	})
	return a, b
}

func TestInOrderDespiteLossDuplicatesAndReordering(t *testing.T) {
	for _, tc := range []struct {
		name               string
		loss, dup, reorder float64
	}{
		{"clean", 0, 0, 0},
		{"lossy", 0.1, 0, 0},
		{"duplicates", 0, 0.2, 0},
		{"reordered", 0, 0, 0.3},
		{"all", 0.05, 0.05, 0.1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ab := newLink(1, tc.loss, tc.dup, tc.reorder)
			ba := newLink(2, tc.loss, tc.dup, tc.reorder)
			a, b := pair(t, ab, ba)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			const n = 300
			errc := make(chan error, 1)
			go func() {
				for i := range n {
					if err := a.Send(ctx, fmt.Appendf(nil, "block %d", i)); err != nil {
						errc <- err
						return
					}
				}
				errc <- a.Drain(ctx)
			}()
			for i := range n {
				got, err := b.Receive(ctx)
				noErr(t, err)
				equal(t, fmt.Sprintf("block %d", i), string(got))
			}
			noErr(t, <-errc)
			equal(t, 0, a.Pending())
			if tc.loss > 0 {
				check(t, a.Stats().Retransmitted > 0, "no retransmission")
			}
			if tc.dup > 0 {
				check(t, b.Stats().Duplicates > 0, "no duplicate seen")
			}
		})
	}
}

func TestEOFAfterEverythingTaken(t *testing.T) {
	a, b := pair(t, newLink(3, 0, 0, 0), newLink(4, 0, 0, 0))
	ctx := context.Background()
	noErr(t, a.Send(ctx, []byte("one")))
	eventually(t, func() bool { return b.Stats().BlocksReceived == 1 })
	b.SetEOF(io.EOF)
	got, err := b.Receive(ctx)
	noErr(t, err)
	equal(t, "one", string(got))
	_, err = b.Receive(ctx)
	isErr(t, err, io.EOF)
}

// A peer that ends its output with a block missing, whether blocks after
// it are held or arrive after its end, has Receive fail at the gap with
// ErrIncomplete, never the end: the reader would take part for the whole.
func TestEndWithBlockMissing(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after []int // blocks arriving before and after the end
		want          []string
		wantErr       error
		afterEOF      uint64
	}{
		{"all taken", []int{1, 2}, nil, []string{"1", "2"}, io.EOF, 0},
		{"gap, later block held", []int{1, 3}, nil, []string{"1"}, jxtarel.ErrIncomplete, 0},
		{"block after the end", []int{1}, []int{2}, []string{"1"}, jxtarel.ErrIncomplete, 1},
		{"taken block repeated after the end", []int{1}, []int{1}, []string{"1"}, io.EOF, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := jxtarel.New(func(context.Context, *message.Message) error { return nil })
			noErr(t, err)
			defer r.Close()
			for _, seq := range tc.before {
				r.Handle(block(seq, []byte(fmt.Sprint(seq))))
			}
			r.SetEOF(io.EOF)
			var got []string
			for len(got) < len(tc.want) {
				p, err := r.Receive(context.Background())
				noErr(t, err)
				got = append(got, string(p))
			}
			for _, seq := range tc.after {
				r.Handle(block(seq, []byte(fmt.Sprint(seq))))
			}
			equal(t, tc.want, got)
			for range 2 { // and it stays so
				_, err = r.Receive(context.Background())
				isErr(t, err, tc.wantErr)
			}
			equal(t, tc.afterEOF, r.Stats().AfterEOF)
		})
	}
}

// A peer that never acknowledges holds the sender to its window, and
// after the give-up time the connection fails.
func TestPeerThatNeverAcknowledges(t *testing.T) {
	var mu sync.Mutex
	sent := 0
	a, err := jxtarel.New(func(ctx context.Context, m *message.Message) error {
		mu.Lock()
		sent++
		mu.Unlock()
		return nil
	}, jxtarel.WithWindow(4, 1<<20), jxtarel.WithGiveUp(3*time.Second))
	noErr(t, err)
	defer a.Close()
	ctx := context.Background()
	for range 4 {
		noErr(t, a.Send(ctx, make([]byte, 1000)))
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	isErr(t, a.Send(short, []byte("fifth")), context.DeadlineExceeded) // the window is full
	equal(t, 4, a.Pending())
	err = a.Send(ctx, []byte("fifth")) // waits until the connection gives up
	isErr(t, err, jxtarel.ErrTimeout)
	isErr(t, a.Drain(ctx), jxtarel.ErrTimeout)
	mu.Lock()
	defer mu.Unlock()
	check(t, sent > 4, "blocks were retransmitted before giving up")
}

// The window's bytes bound what is held, whatever the block count.
func TestWindowBytes(t *testing.T) {
	a, err := jxtarel.New(func(context.Context, *message.Message) error { return nil }, jxtarel.WithWindow(100, 10_000))
	noErr(t, err)
	defer a.Close()
	ctx := context.Background()
	noErr(t, a.Send(ctx, make([]byte, 6000)))
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	isErr(t, a.Send(short, make([]byte, 6000)), context.DeadlineExceeded)
	// a first block larger than the window still goes.
	b, err := jxtarel.New(func(context.Context, *message.Message) error { return nil }, jxtarel.WithWindow(100, 10_000))
	noErr(t, err)
	defer b.Close()
	noErr(t, b.Send(ctx, make([]byte, 20_000)))
}

func block(seq int, data []byte) *message.Message {
	return message.New(message.Element{Namespace: jxtarel.Namespace, Name: fmt.Sprint(seq), MIME: jxtarel.BlockMIME, Data: data})
}

func ack(cum int32, sacks ...int32) *message.Message {
	return message.New(message.Element{Namespace: jxtarel.Namespace, Name: "ack", MIME: jxtarel.AckMIME, Data: jxtarel.AppendAck(nil, cum, sacks)})
}

// A hostile sender's blocks cost at most the receive buffer, and what it
// sends out of bounds is counted, not kept.
func TestReceiveBounds(t *testing.T) {
	var acks []*message.Message
	var mu sync.Mutex
	r, err := jxtarel.New(func(_ context.Context, m *message.Message) error {
		mu.Lock()
		acks = append(acks, m)
		mu.Unlock()
		return nil
	}, jxtarel.WithReceiveBuffer(8, 1000))
	noErr(t, err)
	defer r.Close()
	check(t, r.Handle(block(9, []byte("far ahead"))), "handled")
	check(t, r.Handle(block(2, make([]byte, 600))), "handled")
	check(t, r.Handle(block(3, make([]byte, 600))), "handled") // over the bytes
	check(t, r.Handle(block(2, make([]byte, 600))), "handled") // queued already
	check(t, r.Handle(message.New(message.Text(jxtarel.Namespace, "x1", "?"))), "handled")
	check(t, !r.Handle(message.New(message.Text("other", "1", "not ours"))), "not ours")
	st := r.Stats()
	equal(t, uint64(1), st.DroppedAhead)
	equal(t, uint64(1), st.DroppedFull)
	equal(t, uint64(1), st.Duplicates)
	equal(t, uint64(1), st.Malformed)
	// The next block in order goes into an empty buffer whatever its size.
	r2, err := jxtarel.New(func(context.Context, *message.Message) error { return nil }, jxtarel.WithReceiveBuffer(8, 1000))
	noErr(t, err)
	defer r2.Close()
	r2.Handle(block(1, make([]byte, 5000)))
	got, err := r2.Receive(context.Background())
	noErr(t, err)
	equal(t, 5000, len(got))
	r2.Handle(block(1, []byte("again")))
	equal(t, uint64(1), r2.Stats().Duplicates) // a block already taken is not taken twice
	// The receiver with a hole told the sender about it, with a SACK.
	eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range acks {
			e, _ := m.Get(jxtarel.Namespace, "ack")
			if cum, sacks, err := jxtarel.ParseAck(e.Data); err == nil && cum == 0 && len(sacks) == 1 && sacks[0] == 2 {
				return true
			}
		}
		return false
	})
	// The next block in order is taken however full the buffer is with
	// blocks after it: only it lets Receive free them.
	check(t, r.Handle(block(1, make([]byte, 600))), "handled")
	equal(t, uint64(1), r.Stats().DroppedFull)
	for range 2 {
		got, err := r.Receive(context.Background())
		noErr(t, err)
		equal(t, 600, len(got))
	}
}

// A peer that takes one block per acknowledgement, each naming as
// received the block above a run it claims missing, has each block of
// the run sent again at once only once: not the run at each
// acknowledgement (18 acknowledgements, 153 blocks resent).
func TestAdvancingAckResendsOnce(t *testing.T) {
	a, err := jxtarel.New(func(context.Context, *message.Message) error { return nil })
	noErr(t, err)
	defer a.Close()
	for range 20 {
		noErr(t, a.Send(context.Background(), []byte("block")))
	}
	for k := range int32(18) {
		a.Handle(ack(k+1, 20))
		time.Sleep(15 * time.Millisecond) // past the 10 ms a block waits before it is resent at once
	}
	// 18 blocks once each; once more on their timeout (1 s, no round
	// trip measured) should the test stall.
	if n := a.Stats().Retransmitted; n > 2*18 {
		t.Fatalf("18 acknowledgements had %d blocks resent", n)
	}
}

// Acknowledgements of blocks never sent are refused and counted.
func TestBadAcks(t *testing.T) {
	a, err := jxtarel.New(func(context.Context, *message.Message) error { return nil })
	noErr(t, err)
	defer a.Close()
	noErr(t, a.Send(context.Background(), []byte("one")))
	a.Handle(ack(5))
	a.Handle(message.New(message.Element{Namespace: jxtarel.Namespace, Name: "ack", MIME: jxtarel.AckMIME, Data: []byte{1, 2, 3}}))
	a.Handle(ack(0, 1<<31-1)) // a selective one of a block never sent would have every block below it resent
	equal(t, uint64(3), a.Stats().BadAcks)
	equal(t, 1, a.Pending())
	a.Handle(ack(0, 1)) // selectively acknowledged: not resent, but pending until taken
	equal(t, 1, a.Pending())
	a.Handle(ack(1))
	equal(t, 0, a.Pending())
}

func TestParseAck(t *testing.T) {
	for _, tc := range []struct {
		in    []byte
		cum   int32
		sacks []int32
		err   bool
	}{
		{[]byte{0, 0, 0, 3}, 3, nil, false},
		{jxtarel.AppendAck(nil, 3, []int32{5, 7}), 3, []int32{5, 7}, false},
		{jxtarel.AppendAck(nil, 3, []int32{2, 5}), 3, []int32{5}, false}, // at or below cum: ignored
		{[]byte{0, 0, 3}, 0, nil, true},
		{[]byte{0x80, 0, 0, 0}, 0, nil, true},
		{nil, 0, nil, true},
	} {
		cum, sacks, err := jxtarel.ParseAck(tc.in)
		if tc.err {
			isErr(t, err, jxtarel.ErrMalformed)
			continue
		}
		noErr(t, err)
		equal(t, tc.cum, cum)
		equal(t, tc.sacks, sacks)
	}
	many := jxtarel.AppendAck(nil, 0, make([]int32, 5000))
	for i := range 5000 {
		copy(many[4+4*i:], jxtarel.AppendAck(nil, int32(i+1), nil))
	}
	_, sacks, err := jxtarel.ParseAck(many)
	noErr(t, err)
	equal(t, 1024, len(sacks))
}

func TestClosedConn(t *testing.T) {
	a, err := jxtarel.New(func(context.Context, *message.Message) error { return nil })
	noErr(t, err)
	noErr(t, a.Close())
	isErr(t, a.Send(context.Background(), []byte("x")), jxtarel.ErrClosed)
	_, err = a.Receive(context.Background())
	isErr(t, err, jxtarel.ErrClosed)
	isErr(t, a.Err(), jxtarel.ErrClosed)
}

func BenchmarkTransfer(b *testing.B) {
	ab, ba := newLink(5, 0, 0, 0), newLink(6, 0, 0, 0)
	t := &testing.T{}
	_ = t
	x, err := jxtarel.New(ab.send)
	noErr(b, err)
	y, err := jxtarel.New(ba.send)
	noErr(b, err)
	ab.to, ba.to = func() *jxtarel.Conn { return y }, func() *jxtarel.Conn { return x }
	ab.run()
	ba.run()
	defer func() { x.Close(); y.Close(); ab.stop(); ba.stop() }()
	payload := bytes.Repeat([]byte{7}, jxtarel.MaxBlock)
	ctx := context.Background()
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		for range b.N {
			if err := x.Send(ctx, payload); err != nil {
				return
			}
		}
	}()
	for range b.N {
		if _, err := y.Receive(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func eventually(t testing.TB, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !f(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
	}
}

// lossyLink delivers messages in order through a goroutine, as a TCP
// transport would, losing the first transmission of block lose (none if
// 0).
type lossyLink struct {
	lose    string
	mu      sync.Mutex
	dropped bool
	q       chan *message.Message
	to      *jxtarel.Conn
	wg      sync.WaitGroup
}

func (l *lossyLink) send(ctx context.Context, m *message.Message) error {
	l.mu.Lock()
	if _, ok := m.Get(jxtarel.Namespace, l.lose); ok && !l.dropped {
		l.dropped = true
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	select {
	case l.q <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestOneLostBlockWithLargeBlocks: a socket's window of 20 of its largest
// blocks (1 MiB) held within the peer's receive buffer, and one block
// lost: the blocks after it wait in the receiver's buffer, the lost one is
// sent again and taken, and everything arrives, in order. (With a window
// past the receive buffer, what overflowed it was resent only on
// backed-off timeouts, and the connection crawled until it gave up.)
func TestOneLostBlockWithLargeBlocks(t *testing.T) {
	const blk, n = 1 << 20, 60
	opts := []jxtarel.Option{jxtarel.WithWindow(20, min(20*blk, jxtarel.DefaultReceiveBytes)), jxtarel.WithMaxBlock(blk)}
	ab := &lossyLink{lose: "1", q: make(chan *message.Message, 4096)}
	ba := &lossyLink{q: make(chan *message.Message, 4096)}
	a, err := jxtarel.New(ab.send, opts...)
	noErr(t, err)
	b, err := jxtarel.New(ba.send, opts...)
	noErr(t, err)
	ab.to, ba.to = b, a
	for _, l := range []*lossyLink{ab, ba} {
		l.wg.Go(func() {
			for m := range l.q {
				l.to.Handle(m)
			}
		})
	}
	defer func() {
		a.Close()
		b.Close()
		close(ab.q)
		close(ba.q)
		ab.wg.Wait()
		ba.wg.Wait()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sent := make(chan error, 1)
	go func() {
		for i := range n {
			p := make([]byte, blk)
			p[0] = byte(i)
			if err := a.Send(ctx, p); err != nil {
				sent <- err
				return
			}
		}
		sent <- a.Drain(ctx)
	}()
	for i := range n {
		p, err := b.Receive(ctx)
		if err != nil {
			t.Fatalf("received %d of %d blocks, then %v; receiver %+v; sender %+v", i, n, err, b.Stats(), a.Stats())
		}
		if len(p) != blk || p[0] != byte(i) {
			t.Fatalf("block %d: %d bytes starting %d", i, len(p), p[0])
		}
	}
	noErr(t, <-sent)
	if st := b.Stats(); st.DroppedFull != 0 {
		t.Errorf("the receiver dropped %d blocks beyond its buffer: the sender's window outgrew it; receiver %+v; sender %+v", st.DroppedFull, st, a.Stats())
	}
}

// reachable is a SendFunc that fails, as a transport does for a peer it
// can no longer reach, once gone is set.
type reachable struct {
	gone  atomic.Bool
	sends atomic.Int64
}

var errNoPeer = errors.New("no connection to the peer and none can be made")

func (r *reachable) send(ctx context.Context, m *message.Message) error {
	r.sends.Add(1)
	if r.gone.Load() {
		return errNoPeer
	}
	return nil
}

// probing is a Conn probing after d over a reachable link, gone or not.
func probing(t *testing.T, d time.Duration, gone bool) (*reachable, *jxtarel.Conn) {
	t.Helper()
	r := new(reachable)
	r.gone.Store(gone)
	c, err := jxtarel.New(r.send, jxtarel.WithIdleProbe(d))
	noErr(t, err)
	t.Cleanup(func() { c.Close() })
	return r, c
}

// receiveWithin is Receive with a timeout.
func receiveWithin(c *jxtarel.Conn, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := c.Receive(ctx)
	return err
}

func TestIdleProbe(t *testing.T) {
	const probe = 200 * time.Millisecond
	t.Run("gone peer fails the waiting Receive", func(t *testing.T) {
		t.Parallel()
		r, c := probing(t, probe, false)
		c.Handle(block(1, []byte("x")))
		noErr(t, receiveWithin(c, time.Second))
		r.gone.Store(true)
		start := time.Now()
		err := receiveWithin(c, 30*time.Second)
		isErr(t, err, jxtarel.ErrUnreachable)
		isErr(t, err, errNoPeer)
		isErr(t, c.Err(), jxtarel.ErrUnreachable)
		t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
		check(t, c.Stats().Probes >= 3, "fewer than three probes")
	})
	t.Run("a writer gives up on a gone peer before WithGiveUp", func(t *testing.T) {
		t.Parallel()
		r, c := probing(t, probe, false)
		noErr(t, c.Send(context.Background(), []byte("x")))
		r.gone.Store(true) // before any acknowledgement
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		isErr(t, c.Drain(ctx), jxtarel.ErrUnreachable)
		check(t, c.Stats().Retransmitted >= 3, "fewer than three retransmissions")
	})
	t.Run("quiet peer that can be reached is waited for", func(t *testing.T) {
		t.Parallel()
		_, c := probing(t, probe, false)
		isErr(t, receiveWithin(c, 5*probe), context.DeadlineExceeded)
		noErr(t, c.Err())
		check(t, c.Stats().Probes >= 1, "no probe")
	})
	t.Run("word from the peer starts the count again", func(t *testing.T) {
		t.Parallel()
		_, c := probing(t, probe, true)
		got := make(chan error, 1)
		go func() { got <- receiveWithin(c, 30*time.Second) }()
		eventually(t, func() bool { return c.Stats().Probes >= 2 })
		c.Handle(ack(0)) // the peer spoke between two failed probes
		isErr(t, <-got, jxtarel.ErrUnreachable)
		check(t, c.Stats().Probes >= 5, "the peer's word did not start the count again")
	})
	t.Run("no probe while nobody waits, nor when off", func(t *testing.T) {
		t.Parallel()
		_, idle := probing(t, probe, true)
		_, off := probing(t, 0, true)
		isErr(t, receiveWithin(off, 5*probe), context.DeadlineExceeded)
		for _, c := range []*jxtarel.Conn{idle, off} {
			noErr(t, c.Err())
			equal(t, uint64(0), c.Stats().Probes)
		}
	})
	_, err := jxtarel.New(nil, jxtarel.WithIdleProbe(-time.Second))
	isErr(t, err, jxtarel.ErrBadOption)
}

// A block already taken, sent again, means the acknowledgement was lost:
// the receiver sends it again (the package doc).
func TestTakenBlockRepeatsAck(t *testing.T) {
	var rec ackRecorder
	r, err := jxtarel.New(func(_ context.Context, m *message.Message) error { rec.record(m); return nil })
	noErr(t, err)
	defer r.Close()
	acks := rec.acks
	r.Handle(block(1, []byte("one")))
	_, err = r.Receive(context.Background())
	noErr(t, err)
	eventually(t, func() bool { return len(acks()) == 1 })
	eventually(t, func() bool {
		r.Handle(block(1, []byte("one")))
		return len(acks()) >= 2
	})
	equal(t, []int32{1, 1}, acks()[:2])
	check(t, r.Stats().Duplicates > 0, "duplicate not counted")
}

// A block taken just before Close is acknowledged, even when the
// acknowledgement run had due was still being sent (here: stalled in the
// transport) as Close stopped it. A JxtaBiDiPipe's peer sends its close
// and then waits for its blocks' acknowledgements: the receiver, seeing
// that close, closes too, and its Close used to cancel the owed
// acknowledgement, so the peer reported blocks that had arrived as
// unacknowledged ("blocks sent were not acknowledged: 1 of them").
func TestCloseAcknowledgesBlocksTaken(t *testing.T) {
	var rec ackRecorder
	var calls atomic.Int64
	stalled := make(chan struct{})
	r, err := jxtarel.New(func(ctx context.Context, m *message.Message) error {
		if calls.Add(1) == 1 { // the first acknowledgement stalls until cancelled
			close(stalled)
			<-ctx.Done()
			return ctx.Err()
		}
		rec.record(m)
		return nil
	})
	noErr(t, err)
	r.Handle(block(1, []byte("one")))
	_, err = r.Receive(context.Background())
	noErr(t, err)
	<-stalled
	noErr(t, r.Close())
	equal(t, []int32{1}, rec.acks())

	// Nothing owed, nothing sent: a connection whose acknowledgements
	// went out sends none at Close, nor does one that failed.
	var sent atomic.Int64
	q, err := jxtarel.New(func(ctx context.Context, m *message.Message) error {
		sent.Add(1)
		return nil
	})
	noErr(t, err)
	q.Handle(block(1, []byte("one")))
	_, err = q.Receive(context.Background())
	noErr(t, err)
	eventually(t, func() bool { return sent.Load() == 1 })
	noErr(t, q.Close())
	noErr(t, q.Close())
	equal(t, int64(1), sent.Load())
}

// ackRecorder keeps the cumulative acknowledgements a connection sends.
type ackRecorder struct {
	mu   sync.Mutex
	cums []int32
}

// record keeps m's acknowledgement, if it is one.
func (a *ackRecorder) record(m *message.Message) {
	e, _ := m.Get(jxtarel.Namespace, "ack")
	if cum, _, err := jxtarel.ParseAck(e.Data); err == nil {
		a.mu.Lock()
		a.cums = append(a.cums, cum)
		a.mu.Unlock()
	}
}

// acks returns the acknowledgements kept so far.
func (a *ackRecorder) acks() []int32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.cums)
}
