package cli

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// TestForwardToPeerNotReading: a libp2p peer keeps its connection but
// reads nothing more (its pipe's handler holds the first message), and
// the bridge forwards it a message larger than a stream's window. The
// forward ends with an error within its bound, so the forwarding loop
// goes on; before, the Send waited for the peer as long as the bridge
// ran, holding every sender behind it.
func TestForwardToPeerNotReading(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lo := []string{"/ip4/127.0.0.1/tcp/0"}
	bridge, deaf := startTestPeer(ctx, t, lo, jxtaConfig{}), startTestPeer(ctx, t, lo, jxtaConfig{})
	a := newUnicastAdv(t)
	held, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	in, err := deaf.pipes.NewInputPipe(a, pipe.WithHandler(func(r *pipe.Received) {
		held <- struct{}{}
		<-release
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	to := pipe.ToPeers(peer.AddrInfo{ID: deaf.node.ID(), Addrs: deaf.node.Host().Addrs()})
	out, err := bridge.pipes.NewOutputPipe(ctx, a, to)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := out.Send(ctx, message.New(message.Text("", "t", "first"))); err != nil {
		t.Fatal(err)
	}
	<-held // the peer reads nothing more

	const bound = 500 * time.Millisecond
	f := &forwarder{pipes: bridge.pipes, adv: a, opt: to, confirm: true,
		timeout: func(*message.Message) time.Duration { return bound }}
	defer f.close()
	big := message.New(message.Element{Name: "big", Data: make([]byte, 20<<20)}) // beyond yamux's 16 MiB window
	done := make(chan error, 1)
	go func() { done <- f.send(ctx, big) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("forward to a peer not reading: %v, want it to end at its bound", err)
		}
	case <-time.After(30 * time.Second): // a hang guard, far beyond the bound
		cancel()
		t.Fatalf("a forward to a peer not reading still waited after 30 s (bound %v): %v", bound, <-done)
	}
}

// startTestPeer starts a peer stack listening on listen, closed when tb
// ends.
func startTestPeer(ctx context.Context, tb testing.TB, listen []string, j jxtaConfig) *peerStack {
	tb.Helper()
	p, err := startPeer(ctx, "", listen, j)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}

// newUnicastAdv is a new unicast pipe's advertisement.
func newUnicastAdv(tb testing.TB) *adv.PipeAdvertisement {
	tb.Helper()
	pid, err := id.NewPipeID(id.NetPeerGroupID)
	if err != nil {
		tb.Fatal(err)
	}
	return &adv.PipeAdvertisement{ID: pid, Type: adv.Unicast}
}
