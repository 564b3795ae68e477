package endpoint_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// seqMessage is message seq of sender g, padded to size bytes.
func seqMessage(g, seq, size int) *message.Message {
	b := make([]byte, max(size, 16))
	binary.BigEndian.PutUint64(b, uint64(g))
	binary.BigEndian.PutUint64(b[8:], uint64(seq))
	return message.New(message.Element{Name: "s", Data: b})
}

// goSenders runs f(g) for each of n senders in a goroutine of its own;
// wait waits for them.
func goSenders(n int, f func(g int)) (wait func()) {
	var wg sync.WaitGroup
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(g)
		}()
	}
	return wg.Wait
}

// orderChecker is a listener that checks each sender's messages arrive in
// order, each once.
type orderChecker struct {
	mu   sync.Mutex
	next map[uint64]uint64
	errs []error
	n    atomic.Int64
}

func (c *orderChecker) Deliver(_ context.Context, d *endpoint.Delivery) {
	b := d.Message.At(0).Data
	g, seq := binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])
	d.Release()
	c.mu.Lock()
	if want := c.next[g]; seq != want && len(c.errs) < 10 {
		c.errs = append(c.errs, fmt.Errorf("sender %d: message %d arrived when %d was due", g, seq, want))
	}
	c.next[g] = seq + 1
	c.mu.Unlock()
	c.n.Add(1)
}

func (c *orderChecker) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.errs...)
}

// TestConcurrentSendersKeepOrder: eight goroutines send to one peer at
// once, small messages that are queued and batched mixed with large ones
// written by their Send, while another goroutine flushes now and then.
// Every message arrives once, in its sender's order, and each Flush
// returns only after everything accepted before it was handed over.
func TestConcurrentSendersKeepOrder(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, b := newService(t, nodes[0]), newService(t, nodes[1])
	c := &orderChecker{next: map[uint64]uint64{}}
	if err := b.Register("order", "", c); err != nil {
		t.Fatal(err)
	}
	to := endpoint.PeerAddress(nodes[1].ID(), "order", "")
	const senders, each = 8, 400
	var sent atomic.Int64
	wait := goSenders(senders, func(g int) {
		for seq := range each {
			size := 100
			if seq%97 == 0 {
				size = 40 << 10 // larger than a queued message
			}
			if err := a.Send(ctx(t), to, seqMessage(g, seq, size)); err != nil {
				t.Errorf("sender %d, message %d: %v", g, seq, err)
				return
			}
			sent.Add(1)
		}
	})
	stop := make(chan struct{})
	flushed := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				flushed <- nil
				return
			default:
			}
			before := sent.Load()
			if err := a.Flush(ctx(t), nodes[1].ID()); err != nil {
				flushed <- err
				return
			}
			if got := c.n.Load(); got < before {
				flushed <- fmt.Errorf("Flush returned with %d messages handed over, %d accepted before it", got, before)
				return
			}
		}
	}()
	wait()
	close(stop)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(ctx(t), nodes[1].ID()); err != nil {
		t.Fatal(err)
	}
	if got := c.n.Load(); got != senders*each {
		t.Fatalf("%d messages handed over, want %d", got, senders*each)
	}
	if err := c.err(); err != nil {
		t.Fatal(err)
	}
}

// TestCancelledSendIsNotSent: while the receiver's listener is stuck, the
// sender's queue and the stream's windows fill and Sends wait; Sends whose
// contexts end then fail and their messages are not sent. Once the
// listener lets go, exactly the messages whose Send succeeded arrive, in
// order, and Flush reports nothing lost.
func TestCancelledSendIsNotSent(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, b := newService(t, nodes[0]), newService(t, nodes[1])
	release := make(chan struct{})
	var once sync.Once
	entered := make(chan struct{})
	c := &orderChecker{next: map[uint64]uint64{}}
	if err := b.Register("order", "", endpoint.ListenerFunc(func(ctx context.Context, d *endpoint.Delivery) {
		once.Do(func() { close(entered); <-release })
		c.Deliver(ctx, d)
	})); err != nil {
		t.Fatal(err)
	}
	to := endpoint.PeerAddress(nodes[1].ID(), "order", "")
	if err := a.Send(ctx(t), to, seqMessage(0, 0, 100)); err != nil {
		t.Fatal(err)
	}
	<-entered
	// Fill everything; each Send that cannot get in within its context
	// fails. Stop after a few such failures.
	accepted, failed := 1, 0
	for seq := 1; failed < 3; seq++ {
		sctx, cancel := context.WithTimeout(ctx(t), 50e6) // 50 ms: when to give up, not an assertion
		err := a.Send(sctx, to, seqMessage(0, accepted, 1000))
		cancel()
		switch {
		case err == nil:
			accepted++
		case errors.Is(err, context.DeadlineExceeded):
			failed++
		default:
			t.Fatalf("message %d: %v", seq, err)
		}
		if seq > 1_000_000 {
			t.Fatal("a stuck receiver accepted a million messages: no backpressure")
		}
	}
	close(release)
	if err := a.Flush(ctx(t), nodes[1].ID()); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if got := c.n.Load(); got != int64(accepted) {
		t.Fatalf("%d messages handed over, %d accepted", got, accepted)
	}
	if err := c.err(); err != nil {
		t.Fatal(err)
	}
}

// TestLostQueueIsReported: messages accepted into the queue whose stream
// then fails are reported, by the next Send and by Flush, never dropped
// in silence.
func TestLostQueueIsReported(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a := newService(t, nodes[0])
	b, err := endpoint.New(nodes[1])
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{})
	var once sync.Once
	if err := b.Register("stuck", "", endpoint.ListenerFunc(func(ctx context.Context, _ *endpoint.Delivery) {
		once.Do(func() { close(entered) })
		<-ctx.Done() // until the service closes
	})); err != nil {
		t.Fatal(err)
	}
	to := endpoint.PeerAddress(nodes[1].ID(), "stuck", "")
	if err := a.Send(ctx(t), to, seqMessage(0, 0, 100)); err != nil {
		t.Fatal(err)
	}
	<-entered
	for i := range 100 {
		if err := a.Send(ctx(t), to, seqMessage(0, i+1, 100)); err != nil {
			t.Fatal(err)
		}
	}
	b.Close() // resets the stream under the queued messages
	// Sends go on until one learns of the failure (the flusher may still
	// be writing into the dying stream for a while).
	var sendErr error
	for i := 0; sendErr == nil && i < 1_000_000; i++ {
		sctx, cancel := context.WithTimeout(ctx(t), 50e6)
		sendErr = a.Send(sctx, to, seqMessage(0, 1000+i, 100))
		cancel()
	}
	if sendErr == nil {
		t.Fatal("a million Sends to a closed service succeeded")
	}
	// Whichever way the Send learnt of it (its own write failed, the
	// flusher's did, or the queue never drained), Flush reports that
	// messages accepted earlier may be lost.
	fctx, cancel := context.WithTimeout(ctx(t), 5e9)
	defer cancel()
	if err := a.Flush(fctx, nodes[1].ID()); !errors.Is(err, endpoint.ErrMaybeLost) {
		t.Fatalf("Flush after losing accepted messages: %v, want ErrMaybeLost", err)
	}
}

// TestFlushFailsWhenThePeerDies: the receiving peer's host closes while
// a Flush waits for it, with a message read by nobody. Its connection's
// end reaches the sender as a reset that wraps io.EOF ("connection
// closed: EOF"), which must not pass for the receiver's clean end of
// stream: Flush reports that messages may be lost.
func TestFlushFailsWhenThePeerDies(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a := newService(t, nodes[0])
	b, err := endpoint.New(nodes[1])
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	var once sync.Once
	if err := b.Register("stuck", "", endpoint.ListenerFunc(func(ctx context.Context, _ *endpoint.Delivery) {
		once.Do(func() { close(entered) })
		select {
		case <-release:
		case <-ctx.Done():
		}
	})); err != nil {
		t.Fatal(err)
	}
	to := endpoint.PeerAddress(nodes[1].ID(), "stuck", "")
	// The first message holds the receiver's reader; the second waits
	// unread behind it.
	for i := range 2 {
		if err := a.Send(ctx(t), to, seqMessage(0, i, 100)); err != nil {
			t.Fatal(err)
		}
	}
	<-entered
	flushed := make(chan error, 1)
	go func() { flushed <- a.Flush(ctx(t), nodes[1].ID()) }()
	// Let the Flush write its end of stream and wait (either way the
	// Flush must fail: this only makes the wait the likelier path).
	time.Sleep(50 * time.Millisecond)
	nodes[1].Host().Close()
	if err := <-flushed; err == nil {
		t.Fatal("Flush returned nil though the receiver died with a message unread")
	}
}

// TestSendersReachTheirDestinations: a frame to the destination of the
// one before it in a batch does not name it (package doc). Eight
// goroutines send to one peer, each message to one of three destinations
// (two params of one service and another service), in runs and
// alternating, small and large, some with contexts that end while the
// message waits or is written. Every message must reach the listener it
// was sent to — never another — each once, in its sender's order, and
// every Send that succeeded must arrive.
func TestSendersReachTheirDestinations(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, b := newService(t, nodes[0]), newService(t, nodes[1])
	dests := []struct{ service, param string }{{"dest", "p0"}, {"dest", "p1"}, {"other", ""}}
	checkers := make([]*orderChecker, len(dests))
	var wrong atomic.Int64
	for i, d := range dests {
		c := &orderChecker{next: map[uint64]uint64{}}
		checkers[i] = c
		if err := b.Register(d.service, d.param, endpoint.ListenerFunc(func(ctx context.Context, dl *endpoint.Delivery) {
			if got := dl.Message.At(0).Data[16]; int(got) != i {
				wrong.Add(1)
			}
			c.Deliver(ctx, dl)
		})); err != nil {
			t.Fatal(err)
		}
	}
	const senders, each = 8, 600
	var sent [3]atomic.Int64
	goSenders(senders, func(g int) {
		var seq [3]int
		for i := range each {
			di := (i / (1 + g%4)) % len(dests) // runs of 1 to 4 messages to a destination
			size := 100
			if i%89 == 0 {
				size = 40 << 10
			}
			m := seqMessage(g, seq[di], size)
			m.At(0).Data[16] = byte(di)
			sctx, cancel := ctx(t), context.CancelFunc(func() {})
			if i%7 == 0 {
				sctx, cancel = context.WithTimeout(ctx(t), time.Duration(i%50)*time.Microsecond)
			}
			err := a.Send(sctx, endpoint.PeerAddress(nodes[1].ID(), dests[di].service, dests[di].param), m)
			cancel()
			switch {
			case err == nil:
				seq[di]++
				sent[di].Add(1)
			case errors.Is(err, context.DeadlineExceeded): // not sent, or Flush says
			default:
				t.Errorf("sender %d, message %d: %v", g, i, err)
				return
			}
		}
	})()
	if err := a.Flush(ctx(t), nodes[1].ID()); err != nil {
		t.Fatal(err)
	}
	if n := wrong.Load(); n > 0 {
		t.Fatalf("%d messages reached another destination than theirs", n)
	}
	for i, c := range checkers {
		if got := c.n.Load(); got != sent[i].Load() {
			t.Errorf("%s/%s: %d messages handed over, %d sent", dests[i].service, dests[i].param, got, sent[i].Load())
		}
		if err := c.err(); err != nil {
			t.Errorf("%s/%s: %v", dests[i].service, dests[i].param, err)
		}
	}
}

// TestBatchNamesItsDestinationOnce reads the frames a sender writes with
// a parser of its own, as another implementation would: while eight
// goroutines send to one destination, messages leave in batches, and only
// a batch's first frame names the destination (package doc). Every frame
// carries its message whole.
func TestBatchNamesItsDestinationOnce(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a := newService(t, nodes[0])
	const senders, each = 8, 500
	type tally struct{ named, repeated int }
	got := make(chan tally, 1)
	nodes[1].Host().SetStreamHandler(endpoint.ProtocolID, func(st network.Stream) {
		defer st.Reset()
		r := bufio.NewReader(st)
		var n tally
		for n.named+n.repeated < senders*each {
			d, err := binary.ReadUvarint(r)
			if err != nil {
				t.Errorf("frame %d: %v", n.named+n.repeated, err)
				break
			}
			if d == 0 {
				n.repeated++
			} else {
				n.named++
				name := make([]byte, d-1)
				io.ReadFull(r, name)
				pl, _ := binary.ReadUvarint(r)
				param := make([]byte, pl)
				io.ReadFull(r, param)
				if string(name) != "dest" || string(param) != "p" {
					t.Errorf("frame names %q %q", name, param)
				}
			}
			l, _ := binary.ReadUvarint(r)
			msg := make([]byte, l)
			if _, err := io.ReadFull(r, msg); err != nil {
				t.Errorf("message of %d bytes: %v", l, err)
				break
			}
			if _, err := wire.Unmarshal(msg); err != nil {
				t.Errorf("message: %v", err)
			}
		}
		got <- n
	})
	to := endpoint.PeerAddress(nodes[1].ID(), "dest", "p")
	goSenders(senders, func(g int) {
		for seq := range each {
			if err := a.Send(ctx(t), to, seqMessage(g, seq, 100)); err != nil {
				t.Errorf("sender %d: %v", g, err)
				return
			}
		}
	})()
	n := <-got
	t.Logf("%d frames named the destination, %d repeated it", n.named, n.repeated)
	if n.repeated == 0 {
		t.Fatalf("all %d frames named their destination", n.named)
	}
}

// TestCutFlushReportsMaybeLost: a Flush whose context ends while the
// receiver's listener still holds the first of the messages it covers
// resets the stream under the rest; it must say they may be lost (no
// later Flush knows of them), and the same when an earlier Send's failure
// had already lost messages on that stream.
func TestCutFlushReportsMaybeLost(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, b := newService(t, nodes[0]), newService(t, nodes[1])
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	if err := b.Register("slow", "", endpoint.ListenerFunc(func(_ context.Context, d *endpoint.Delivery) {
		select {
		case entered <- struct{}{}:
			<-release
		default:
		}
		d.Release()
	})); err != nil {
		t.Fatal(err)
	}
	defer close(release)
	to := endpoint.PeerAddress(nodes[1].ID(), "slow", "")
	for i := range 10 {
		if err := a.Send(ctx(t), to, seqMessage(0, i, 100)); err != nil {
			t.Fatal(err)
		}
	}
	<-entered
	fctx, cancel := context.WithTimeout(ctx(t), 100*time.Millisecond) // ends while the listener holds on
	defer cancel()
	err := a.Flush(fctx, nodes[1].ID())
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, endpoint.ErrMaybeLost) {
		t.Fatalf("a Flush cut while 9 messages were unread: %v, want the deadline and ErrMaybeLost", err)
	}
	if err := a.Flush(ctx(t), nodes[1].ID()); err != nil {
		t.Fatalf("the next Flush: %v (the loss was reported once already)", err)
	}
}
