package p2pmsg_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	"go.uber.org/goleak"

	"github.com/p2pmsg/p2pmsg"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

// logRoutine is go-log's writer, started once per process and never
// stopped.
var logRoutine = goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, logRoutine)
}

const loopback = "/ip4/127.0.0.1/tcp/0"

// newPeer starts a loopback peer, closed when the test ends.
func newPeer(t *testing.T, opts ...p2pmsg.Option) *p2pmsg.Peer {
	t.Helper()
	p, err := p2pmsg.New(context.Background(), append([]p2pmsg.Option{p2pmsg.WithListenAddrs(loopback)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestClose checks that Close stops all four layers, top down, and that
// closing again, even concurrently, is harmless.
func TestClose(t *testing.T) {
	ctx := testContext(t)
	other := newPeer(t)
	p, err := p2pmsg.New(ctx, p2pmsg.WithListenAddrs(loopback), p2pmsg.WithEphemeralKey())
	if err != nil {
		t.Fatal(err)
	}
	// What each layer made before Close must report it closed after.
	a, _ := adv.New(adv.Unicast, "pipe", "")
	in, err := p.Pipes().NewInputPipe(a)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := adv.New(adv.Unicast, "socket", "")
	l, err := p.Sockets().Listen(b)
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = p.Close() })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Close #%d: %v", i, err)
		}
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close after Close: %v", err)
	}

	if _, err := l.Accept(); !errors.Is(err, socket.ErrClosed) {
		t.Errorf("Accept on a socket listener made before Close: %v, want %v", err, socket.ErrClosed)
	}
	if _, err := in.Receive(ctx); !errors.Is(err, pipe.ErrClosed) {
		t.Errorf("Receive on an input pipe bound before Close: %v, want %v", err, pipe.ErrClosed)
	}
	// New listeners and pipes fail too, though with the closed error of
	// whichever layer notices first (socket.Service.Listen asks the pipe
	// service before looking at itself).
	c, _ := adv.New(adv.Unicast, "after", "")
	if _, err := p.Sockets().Listen(c); !errors.Is(err, socket.ErrClosed) && !errors.Is(err, pipe.ErrClosed) {
		t.Errorf("Sockets().Listen after Close: %v, want a closed error", err)
	}
	if _, err := p.Pipes().NewInputPipe(c); !errors.Is(err, pipe.ErrClosed) && !errors.Is(err, endpoint.ErrClosed) {
		t.Errorf("Pipes().NewInputPipe after Close: %v, want a closed error", err)
	}
	if err := p.Endpoint().Register("svc", "", endpoint.ListenerFunc(func(context.Context, *endpoint.Delivery) {})); !errors.Is(err, endpoint.ErrClosed) {
		t.Errorf("Endpoint().Register after Close: %v, want %v", err, endpoint.ErrClosed)
	}
	msg := message.New(message.Text("", "text", "hi"))
	if err := p.Endpoint().Send(ctx, endpoint.PeerAddress(other.ID(), "svc", ""), msg); !errors.Is(err, endpoint.ErrClosed) {
		t.Errorf("Endpoint().Send after Close: %v, want %v", err, endpoint.ErrClosed)
	}
	h := p.Node().Host()
	if addrs := h.Network().ListenAddresses(); len(addrs) != 0 {
		t.Errorf("host still listens at %v after Close", addrs)
	}
	if err := p.Node().Connect(ctx, other.AddrInfo()); !errors.Is(err, swarm.ErrSwarmClosed) {
		t.Errorf("Node().Connect after Close: %v, want %v", err, swarm.ErrSwarmClosed)
	}
}

// TestNewFails checks that New refuses bad options with errors that say
// which layer refused them, and that a step failing after others started
// leaves nothing running.
func TestNewFails(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	heldAddr := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", held.Addr().(*net.TCPAddr).Port)
	ident := jxtaIdentity(t)

	tests := []struct {
		name    string
		opts    []p2pmsg.Option
		wantErr error
		bad     bool // also matches p2pmsg.ErrBadOption
	}{
		// Refused before anything starts.
		{"nil option", []p2pmsg.Option{nil}, p2pmsg.ErrBadOption, true},
		{"nil node option", []p2pmsg.Option{p2pmsg.WithNodeOptions(nil)}, p2pmsg.ErrBadOption, true},
		{"nil endpoint option", []p2pmsg.Option{p2pmsg.WithEndpointOptions(nil)}, p2pmsg.ErrBadOption, true},
		{"nil pipe option", []p2pmsg.Option{p2pmsg.WithPipeOptions(nil)}, p2pmsg.ErrBadOption, true},
		{"nil socket option", []p2pmsg.Option{p2pmsg.WithSocketOptions(nil)}, p2pmsg.ErrBadOption, true},
		{"JXTA without identity", []p2pmsg.Option{p2pmsg.WithJXTA(nil, "")}, p2pmsg.ErrBadOption, true},
		// Refused by the node, the first step.
		{"listen address not a multiaddr", []p2pmsg.Option{p2pmsg.WithListenAddrs("127.0.0.1:0")}, node.ErrBadOption, true},
		{"key file and ephemeral key", []p2pmsg.Option{p2pmsg.WithKeyFile(filepath.Join(t.TempDir(), "k")), p2pmsg.WithEphemeralKey()}, node.ErrBadOption, true},
		{"DHT mode", []p2pmsg.Option{p2pmsg.WithDHT(node.DHTMode(7))}, node.ErrBadOption, true},
		{"socket streams per peer", []p2pmsg.Option{p2pmsg.WithNodeOptions(node.WithSocketStreamsPerPeer(0))}, node.ErrBadOption, true},
		{"listen address in use", []p2pmsg.Option{p2pmsg.WithListenAddrs(heldAddr)}, node.ErrAddrInUse, false},
		// Refused after the node started: it must be closed again.
		{"endpoint option", []p2pmsg.Option{p2pmsg.WithEndpointOptions(endpoint.WithMaxStreamsPerPeer(0))}, endpoint.ErrBadOption, true},
		{"JXTA listen address", []p2pmsg.Option{p2pmsg.WithJXTA(ident, "udp://127.0.0.1:0")}, jxtatcp.ErrAddress, false},
		{"JXTA transport option", []p2pmsg.Option{p2pmsg.WithJXTA(ident, "tcp://127.0.0.1:0", jxtatcp.WithMaxMessageSize(1))}, jxtatcp.ErrBadOption, true},
		{"JXTA public address", []p2pmsg.Option{p2pmsg.WithJXTA(ident, "tcp://127.0.0.1:0", jxtatcp.WithPublicAddress("udp://x:1"))}, jxtatcp.ErrAddress, true},
		{"pipe option", []p2pmsg.Option{p2pmsg.WithPipeOptions(pipe.WithQueueLen(0))}, pipe.ErrBadOption, true},
		{"socket option", []p2pmsg.Option{p2pmsg.WithSocketOptions(socket.WithBacklog(0))}, socket.ErrBadOption, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := append([]p2pmsg.Option{p2pmsg.WithListenAddrs(loopback)}, tt.opts...)
			p, err := p2pmsg.New(testContext(t), opts...)
			if p != nil {
				p.Close()
				t.Fatal("New returned a peer")
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("New: %v, want %v", err, tt.wantErr)
			}
			if got := errors.Is(err, p2pmsg.ErrBadOption); got != tt.bad {
				t.Errorf("errors.Is(%v, ErrBadOption) = %v, want %v", err, got, tt.bad)
			}
			goleak.VerifyNone(t, logRoutine)
		})
	}
}

// TestSocketStreamsPerPeer checks that node.WithSocketStreamsPerPeer,
// given through WithNodeOptions, bounds the pool of sockets one client
// keeps open on the peer, and that the client is told why.
func TestSocketStreamsPerPeer(t *testing.T) {
	const pool = 2
	server := newPeer(t, p2pmsg.WithNodeOptions(node.WithSocketStreamsPerPeer(pool)))
	client := newPeer(t, p2pmsg.WithBootstrapPeers(server.AddrInfo()))
	a, _ := adv.New(adv.Unicast, "pool", "")
	l, err := server.Sockets().Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range pool {
		c, err := client.Sockets().Dial(testContext(t), a, pipe.ToPeers(server.AddrInfo()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := l.AcceptContext(testContext(t))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
	}
	if _, err := client.Sockets().Dial(testContext(t), a, pipe.ToPeers(server.AddrInfo())); !errors.Is(err, socket.ErrRefused) {
		t.Fatalf("a socket beyond the server's bound of %d: %v, want %v", pool, err, socket.ErrRefused)
	}
}

// TestKeyFile checks that WithKeyFile reaches the node: a peer started
// again from the same file has the same ID.
func TestKeyFile(t *testing.T) {
	key := filepath.Join(t.TempDir(), "identity.key")
	var ids []string
	for range 2 {
		p, err := p2pmsg.New(testContext(t), p2pmsg.WithListenAddrs(loopback), p2pmsg.WithKeyFile(key))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ID().String())
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if ids[0] != ids[1] {
		t.Errorf("IDs from the same key file differ: %s, %s", ids[0], ids[1])
	}
}

// TestWithJXTA checks that WithJXTA makes the peer a JXTA peer: its
// endpoint has a JXTA transport with the given identity, and a unicast
// pipe carries a message from one such peer to another over JXTA's TCP
// transport.
func TestWithJXTA(t *testing.T) {
	ctx := testContext(t)
	identA, identB := jxtaIdentity(t), jxtaIdentity(t)
	a := newPeer(t, p2pmsg.WithJXTA(identA, "tcp://127.0.0.1:0"))
	b := newPeer(t, p2pmsg.WithJXTA(identB, ""))
	jx := a.Endpoint().JXTA()
	if jx == nil {
		t.Fatal("Endpoint().JXTA() is nil")
	}
	if jx.ID() != identA.ID() {
		t.Errorf("JXTA transport ID %v, want %v", jx.ID(), identA.ID())
	}
	if len(jx.Addrs()) != 1 {
		t.Fatalf("JXTA transport listens at %v, want one address", jx.Addrs())
	}

	chat, _ := adv.New(adv.Unicast, "chat", "")
	in, err := a.Pipes().NewInputPipe(chat)
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.Pipes().NewOutputPipe(ctx, chat, pipe.ToJXTAPeers(jx.Addrs()[0]))
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Send(ctx, message.New(message.Text("", "text", "over jxta"))); err != nil {
		t.Fatal(err)
	}
	r, err := in.ReceiveFrom(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := r.Message.Get("", "text"); !ok || string(e.Data) != "over jxta" {
		t.Errorf("received %v", r.Message)
	}
}

func jxtaIdentity(t *testing.T) *jxtatcp.Identity {
	t.Helper()
	ident, err := jxtatcp.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	return ident
}
