package cli_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// hostilePeer is a peer built from the public packages, sending or
// receiving what the p2pmsg command would not.
type hostilePeer struct {
	node  *node.Node
	pipes *pipe.Service
}

func newHostilePeer(t *testing.T) *hostilePeer {
	t.Helper()
	n := testutil.NewNode(t)
	ep, err := endpoint.New(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	ps, err := pipe.New(ep)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	return &hostilePeer{node: n, pipes: ps}
}

// readAdv parses the pipe advertisement in file.
func readAdv(t *testing.T, file string) *adv.PipeAdvertisement {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	a, err := adv.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// outputTo opens an output pipe to the pipe of advFile bound by the peer
// at addr, a full multiaddr.
func (h *hostilePeer) outputTo(ctx context.Context, t *testing.T, advFile, addr string) *pipe.OutputPipe {
	t.Helper()
	info, err := peer.AddrInfoFromString(addr)
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.pipes.NewOutputPipe(ctx, readAdv(t, advFile), pipe.ToPeers(*info))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	return out
}

// TestRecvPSKDeliversOnlySealed: `recv --psk` takes only what the key
// vouches for. A peer without the key sends a plain element in JXTA's own
// namespace (which recv once exempted as JXTA's: jxta:order was printed
// as message 1, and --count 1 exited 0), an empty message, and a message
// holding only endpoint address headers: each is refused, and the
// sender's Flush says so. The message that ends recv is an honest sealed
// one, and nothing of the others is printed.
func TestRecvPSKDeliversOnlySealed(t *testing.T) {
	advFile := newPipeAdv(t, "unicast")
	psk := writeFile(t, "psk", []byte(strings.Repeat("ab", 32)))
	recv := start(t, nil, "recv", "--pipe", advFile, "--listen", loopback, "--psk", psk, "--count", "1")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := newHostilePeer(t)
	out := h.outputTo(ctx, t, advFile, recv.addrs[0])
	for _, tt := range []struct {
		what string
		m    *message.Message
	}{
		{"a plain element in the jxta namespace", message.New(message.Text(message.JXTANamespace, "order", "wire 1,000,000 to Mallory"))},
		{"an empty message", message.New()},
		{"only endpoint address headers", message.New(
			message.Text(message.JXTANamespace, endpoint.SourceElement, "p2p://"+h.node.Host().ID().String()),
			message.Text(message.JXTANamespace, jxtatcp.DestinationElement, "jxta://cbid-0/PipeService/x"))},
	} {
		what, m := tt.what, tt.m
		if err := out.Send(ctx, m); err != nil {
			t.Fatalf("%s: send: %v", what, err)
		}
		err := out.Flush(ctx)
		var ue *pipe.UndeliveredError
		if !errors.As(err, &ue) || len(ue.Refusals) == 0 || !strings.Contains(ue.Refusals[0].Reason, "not protected as the receiver requires") {
			t.Errorf("%s: flush returned %v, want the receiver's refusal (encoding.ErrPolicy)", what, err)
		}
	}
	if r := run(t, nil, "send", "--pipe", advFile, "--peer", recv.addrs[0], "--elem", "x=sealed", "--encode", "zstd,seal", "--psk", psk); r.code != 0 {
		t.Fatalf("honest send: exit %d: %s", r.code, r.stderr)
	}
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv exit %d: %q", code, recv.stderr)
	}
	if got := recv.stdout.String(); !strings.HasPrefix(got, "message 1 from ") || !strings.Contains(got, "(1 elements)") ||
		!strings.Contains(got, ": sealed\n") || strings.Contains(got, "Mallory") || strings.Contains(got, "jxta:") {
		t.Fatalf("recv printed %q, want only the sealed message", got)
	}
}
