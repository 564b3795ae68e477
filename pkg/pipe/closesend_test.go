package pipe_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// sendCloser is what an output pipe and a Bidi share here.
type sendCloser interface {
	Send(context.Context, *message.Message) error
	Close() error
}

// receiverFunc receives one message.
type receiverFunc func(context.Context) (*message.Message, error)

// closePair opens a pipe of the kind tested from sa's node to sb's and
// returns its sending end and how its receiving end receives.
type closePair func(t *testing.T, sa, sb *pipe.Service) (sendCloser, receiverFunc)

func outputPair(t *testing.T, sa, sb *pipe.Service) (sendCloser, receiverFunc) {
	in, out := onePipe(t, sa, sb, sb.Endpoint().Node().AddrInfo())
	t.Cleanup(func() { in.Close() })
	return out, in.Receive
}

func bidiPair(t *testing.T, sa, sb *pipe.Service) (sendCloser, receiverFunc) {
	l, err := sb.Listen(newAdv(t, adv.Unicast))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c, s := connected(t, sa, l, pipe.ToPeers(sb.Endpoint().Node().AddrInfo()))
	return c, s.Receive
}

// TestCloseEndsWaitingSend checks that Close releases, as net.Conn's
// does, Sends that wait for a receiver that does not read: small ones
// waiting for room in the sender's queue, and a large one stalled in its
// write. They fail with ErrClosed. Nothing that Sends had sent to the
// peer is lost, of this pipe or of others to the same peer, once the
// receiver reads.
func TestCloseEndsWaitingSend(t *testing.T) {
	for _, kind := range []struct {
		name string
		open closePair
	}{{"output pipe", outputPair}, {"bidi", bidiPair}} {
		t.Run(kind.name+"/queue full", func(t *testing.T) { testCloseEndsQueuedSend(t, kind.open) })
		t.Run(kind.name+"/large write", func(t *testing.T) { testCloseEndsLargeWrite(t, kind.open) })
	}
}

// bigSize is larger than a yamux stream's window can ever be (16 MiB): a
// message this large cannot be written until the receiver reads.
const bigSize = 32 << 20

func testCloseEndsQueuedSend(t *testing.T, open closePair) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1], pipe.WithQueueLen(1))
	other, recvOther := outputPair(t, sa, sb)
	big, recvBig := outputPair(t, sa, sb)
	p, recv := open(t, sa, sb)
	// Other pipes' messages go first: one fills its input's queue, the
	// next holds the receiver's reader; then a large one holds the
	// stream's writer for good. So the pipe's Sends queue, and then wait
	// for room, until the receiver reads.
	const others = 3
	for i := range others {
		if err := other.Send(ctx(t), message.New(message.Text("", "n", fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	bigSent := make(chan error, 1)
	// Until the receiver reads, however long the pipe's Sends wait.
	bctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { bigSent <- big.Send(bctx, message.New(message.Bytes("", "big", make([]byte, bigSize)))) }()
	testutil.WaitBlocked(t, "endpoint.writeLarge", false)
	var sent atomic.Int64
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			for {
				m := message.New(message.Bytes("", "pad", make([]byte, 1<<10)))
				if err := p.Send(ctx(t), m); err != nil {
					errs <- err
					return
				}
				sent.Add(1)
			}
		}()
	}
	testutil.WaitBlocked(t, "endpoint.(*sender).send", true)

	closed := make(chan struct{})
	go func() { defer close(closed); p.Close() }() // a Bidi's waits to tell the other end
	for range 2 {
		if err := <-errs; !errors.Is(err, pipe.ErrClosed) {
			t.Fatalf("Send under Close: %v, want pipe.ErrClosed", err)
		}
	}
	for i := range others {
		m, err := recvOther(ctx(t))
		if err != nil || text(m, "n") != fmt.Sprint(i) {
			t.Fatalf("other pipe's message %d: %v, %v", i, m, err)
		}
	}
	if m, err := recvBig(ctx(t)); err != nil || len(m.At(0).Data) != bigSize {
		t.Fatalf("large message: %v, %v", m, err)
	}
	if err := <-bigSent; err != nil {
		t.Fatalf("large message's Send: %v", err)
	}
	for i := range sent.Load() {
		if _, err := recv(ctx(t)); err != nil {
			t.Fatalf("message %d of %d sent before Close: %v", i, sent.Load(), err)
		}
	}
	<-closed
	if err := other.Send(ctx(t), message.New(message.Text("", "n", "after"))); err != nil {
		t.Fatalf("another pipe after Close: %v", err)
	}
	if m, err := recvOther(ctx(t)); err != nil || text(m, "n") != "after" {
		t.Fatalf("another pipe after Close: %v, %v", m, err)
	}
	for _, o := range []*pipe.OutputPipe{other.(*pipe.OutputPipe), big.(*pipe.OutputPipe)} {
		if err := o.Flush(ctx(t)); err != nil {
			t.Fatalf("Flush of another pipe: %v, want nothing lost", err)
		}
	}
}

func testCloseEndsLargeWrite(t *testing.T, open closePair) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1], pipe.WithQueueLen(1))
	p, _ := open(t, sa, sb)
	for range 2 { // one fills the input's queue, the next holds the reader
		if err := p.Send(ctx(t), message.New(message.Text("", "n", "x"))); err != nil {
			t.Fatal(err)
		}
	}
	sent := make(chan error, 1)
	go func() { sent <- p.Send(ctx(t), message.New(message.Bytes("", "big", make([]byte, bigSize)))) }()
	testutil.WaitBlocked(t, "endpoint.writeLarge", false)

	closed := make(chan struct{})
	go func() { defer close(closed); p.Close() }()
	if err := <-sent; !errors.Is(err, pipe.ErrClosed) {
		t.Fatalf("Send under Close: %v, want pipe.ErrClosed", err)
	}
	<-closed
}

// TestSendRacingClose checks that a Send racing its pipe's Close either
// succeeds or fails with ErrClosed, whatever it was doing when Close
// came, and that every message whose Send succeeded is received, or, on
// a Bidi, reported refused by Close. The
// messages are small (up to 12.5 KiB): a large one cut short in its
// write resets the stream, as when its ctx ends, and what the receiver
// had not read of other messages is then reported lost, not received.
func TestSendRacingClose(t *testing.T) {
	for _, kind := range []struct {
		name string
		open closePair
	}{{"output pipe", outputPair}, {"bidi", bidiPair}} {
		t.Run(kind.name, func(t *testing.T) {
			nodes := testutil.NewConnectedNodes(t, 2)
			sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1])
			for round := range 10 {
				p, recv := kind.open(t, sa, sb)
				var sent atomic.Int64
				var wg sync.WaitGroup
				var once sync.Once
				started := make(chan struct{})
				for range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							m := message.New(message.Bytes("", "pad", make([]byte, 100<<(round%8))))
							err := p.Send(ctx(t), m)
							if err != nil {
								if !errors.Is(err, pipe.ErrClosed) {
									t.Errorf("round %d: Send racing Close: %v, want nil or pipe.ErrClosed", round, err)
								}
								return
							}
							sent.Add(1)
							once.Do(func() { close(started) })
						}
					}()
				}
				// Once Sends are under way (the receiver reads only after
				// Close: some may wait for room by then).
				<-started
				closed := make(chan error, 1)
				go func() { closed <- p.Close() }() // a Bidi's waits for room to tell the other end
				wg.Wait()
				got := 0
				for int64(got) < sent.Load() {
					if _, err := recv(ctx(t)); err != nil {
						break // a Bidi's io.EOF: the rest came after its end
					}
					got++
				}
				// A Bidi's Send that raced its Close may have queued its
				// message after the close: the other end refuses it, and
				// Close reports it.
				refused := 0
				var re *endpoint.RefusedError
				if err := <-closed; errors.As(err, &re) {
					refused = re.Count
				} else if err != nil {
					t.Fatalf("round %d: Close: %v", round, err)
				}
				if int64(got+refused) != sent.Load() {
					t.Fatalf("round %d: %d messages sent, %d received, %d refused", round, sent.Load(), got, refused)
				}
			}
		})
	}
}
