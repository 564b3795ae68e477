package endpoint_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// TestSendGroupCloseEndsWaits checks that a SendGroup's Close ends the
// Sends made through it that wait for a receiver that does not read (here
// for room in the queue, behind a large message that holds the stream's
// writer), with ErrGroupClosed, and ends nothing else: a plain Send
// waiting beside them, and everything accepted before, are delivered once
// the receiver reads, and Flush finds nothing lost. A Send through the
// group after Close fails at once.
func TestSendGroupCloseEndsWaits(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, b := newService(t, nodes[0]), newService(t, nodes[1])
	release := make(chan struct{})
	var delivered atomic.Int64
	b.Register("slow", "", endpoint.ListenerFunc(func(context.Context, *endpoint.Delivery) {
		if delivered.Add(1) == 1 {
			<-release // holds the reader
		}
	}))
	to := endpoint.PeerAddress(nodes[1].ID(), "slow", "")
	small := func() *message.Message { return message.New(message.Bytes("", "p", make([]byte, 1<<10))) }
	if err := a.Send(ctx(t), to, small()); err != nil {
		t.Fatal(err)
	}
	// Larger than a yamux stream's window can ever be (16 MiB).
	big := make(chan error, 1)
	// Until the receiver reads, however long the group's Sends wait.
	bctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { big <- a.Send(bctx, to, message.New(message.Bytes("", "p", make([]byte, 32<<20)))) }()
	testutil.WaitBlocked(t, "endpoint.writeLarge", false)

	g := a.NewSendGroup()
	var sent atomic.Int64
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			for {
				if err := g.Send(ctx(t), to, small()); err != nil {
					errs <- err
					return
				}
				sent.Add(1)
			}
		}()
	}
	testutil.WaitBlocked(t, "endpoint.(*sender).send", true)
	plain := make(chan error, 1)
	go func() { plain <- a.Send(ctx(t), to, small()) }()

	g.Close()
	for range 2 {
		if err := <-errs; !errors.Is(err, endpoint.ErrGroupClosed) {
			t.Fatalf("Send through the group under its Close: %v, want ErrGroupClosed", err)
		}
	}
	if err := g.Send(ctx(t), to, small()); !errors.Is(err, endpoint.ErrGroupClosed) {
		t.Fatalf("Send through a closed group: %v, want ErrGroupClosed", err)
	}
	close(release)
	for what, ch := range map[string]chan error{"large": big, "plain": plain} {
		if err := <-ch; err != nil {
			t.Fatalf("%s Send beside the group: %v", what, err)
		}
	}
	if err := a.Flush(ctx(t), nodes[1].ID()); err != nil {
		t.Fatalf("Flush: %v, want nothing lost", err)
	}
	if got, want := delivered.Load(), 3+sent.Load(); got != want {
		t.Fatalf("%d messages delivered, want %d (the group's %d, the first, the large one, the plain one)", got, want, sent.Load())
	}
}
