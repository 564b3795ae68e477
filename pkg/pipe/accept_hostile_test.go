package pipe_test

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// stalledListener is a bidirectional pipe listener on nodes[0] whose
// backlog holds first a connection from nodes[1], a peer that reads
// nothing and has filled the listener's endpoint queue to it with the
// refusals its bogus connect requests drew: answering it waits for room
// that never comes.
func stalledListener(t *testing.T, nodes []*node.Node, opts ...pipe.Option) *pipe.Listener {
	t.Helper()
	victim := newPipes(t, nodes[0], opts...)
	ba := newAdv(t, adv.Unicast)
	l, err := victim.Listen(ba)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	attacker, err := endpoint.New(nodes[1])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { attacker.Close() })
	var mu sync.Mutex
	var held []network.Stream
	nodes[1].Host().SetStreamHandler(endpoint.ProtocolID, func(st network.Stream) {
		mu.Lock()
		held = append(held, st) // never read
		mu.Unlock()
	})
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, st := range held {
			st.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			io.Copy(io.Discard, st)
			st.Reset()
		}
	})
	to := func(param string) endpoint.Address {
		return endpoint.PeerAddress(nodes[0].ID(), pipe.BidiService, param)
	}
	if err := attacker.Send(ctx(t), to("c/"+pipe.Key(ba.ID)+"/"+fmt.Sprintf("%064d", 0)), message.New()); err != nil {
		t.Fatal(err)
	}
	stop, flooded := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop); <-flooded })
	go func() {
		defer close(flooded)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			fctx, cancel := context.WithTimeout(context.Background(), time.Second)
			attacker.Send(fctx, to("c/nosuchpipe/"+fmt.Sprintf("%064d", i)), message.New())
			cancel()
			if i%16 == 0 {
				time.Sleep(2 * time.Millisecond) // let the victim's refusals keep up
			}
		}
	}()
	for deadline := time.Now().Add(40 * time.Second); ; {
		pctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := victim.Endpoint().Send(pctx, endpoint.PeerAddress(nodes[1].ID(), "probe", ""), message.New())
		cancel()
		if err != nil {
			return l // the victim's queue to the attacker is full
		}
		if time.Now().After(deadline) {
			t.Fatal("the victim's queue to the attacker never filled")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A peer that connects, then reads nothing, holds Accept up for the time
// a connecting peer waits for its answer at most, then Accept goes on to
// the next; before, Accept waited for it as long as its context allowed
// (for ever with context.Background) and accepted no one else.
func TestAcceptNotHeldByAPeerThatDoesNotRead(t *testing.T) {
	t.Parallel()
	nodes := testutil.NewConnectedNodes(t, 3)
	const wait = 2 * time.Second
	l := stalledListener(t, nodes, pipe.WithResolveTimeout(wait))
	honest := newPipes(t, nodes[2])
	accepted := make(chan error, 1)
	go func() {
		for {
			b, err := l.Accept(context.Background())
			if err != nil {
				accepted <- err
				return
			}
			b.Close()
			if b.RemotePeer() == nodes[2].ID() {
				accepted <- nil
				return
			}
		}
	}()
	var err error
	for try := 0; try < 3; try++ { // the first may time out behind the stalled answer
		var b *pipe.Bidi
		if b, err = honest.Connect(ctx(t), l.Adv(), pipe.ToPeers(nodes[0].AddrInfo())); err == nil {
			b.Close()
			break
		}
	}
	if err != nil {
		t.Fatalf("an honest peer was never accepted behind one that does not read: %v", err)
	}
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
}

// Listener.Close ends an Accept that is answering a peer that does not
// read (it went on until the Accept's context ended).
func TestListenerCloseEndsAStalledAccept(t *testing.T) {
	t.Parallel()
	nodes := testutil.NewConnectedNodes(t, 2)
	l := stalledListener(t, nodes)
	returned := make(chan error, 1)
	go func() {
		b, err := l.Accept(context.Background())
		if b != nil {
			b.Close()
		}
		returned <- err
	}()
	time.Sleep(time.Second) // Accept is answering the peer that does not read
	l.Close()
	select {
	case err := <-returned:
		t.Logf("Accept returned %v after Close", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Accept still blocked 5 s after Listener.Close")
	}
}
