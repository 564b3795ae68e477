package snippets_test

import (
	"context"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

// The twins of the Go snippets: each function whose name starts with
// "snippet" has a snippet's code as its body (TestSnippets compares their
// tokens, not their comments or layout). Its parameters are the snippet's
// free variables; what follows the line "// end of snippet" makes the body
// compile (uses of the variables it declares) and is not compared, and a
// "…" in a snippet stands for any statements of its twin.

// README.md, "Go API".
func snippetREADMEGoAPI(ctx context.Context, boot peer.AddrInfo, files *adv.PipeAdvertisement) error {
	p, err := p2pmsg.New(ctx,
		p2pmsg.WithKeyFile("identity.key"),
		p2pmsg.WithListenAddrs("/ip4/0.0.0.0/tcp/9701"),
		p2pmsg.WithBootstrapPeers(boot),
		p2pmsg.WithPipeOptions(pipe.WithQueueLen(256)),
	)
	if err != nil {
		return err
	}
	defer p.Close()

	chat, _ := adv.New(adv.Unicast, "chat", "")
	other, _ := peer.AddrInfoFromString("/ip4/10.0.0.7/tcp/9701/p2p/12D3KooW…")
	in, _ := p.Pipes().NewInputPipe(chat)
	out, _ := p.Pipes().NewOutputPipe(ctx, chat, pipe.ToPeers(*other))
	ln, _ := p.Sockets().Listen(files)
	conn, _ := p.Sockets().Dial(ctx, files, pipe.ToPeers(*other))
	// end of snippet
	_, _, _, _ = in, out, ln, conn
	return nil
}

// docs/encoding.md, "Encoding".
func snippetEncoding(ctx context.Context, a *adv.PipeAdvertisement, pipeOut *pipe.OutputPipe, doc []byte) {
	z, _ := zstd.New(zstd.WithLevel(3))
	s, _ := encoding.New([]encoding.Codec{z}, encoding.WithPipeID(a.ID.String()))
	out, _ := encoding.NewOutput(pipeOut, s)
	p := s.Producer()
	out.Send(ctx, message.New(message.Text("", "note", "hi"), p.XML("", "staff", doc)))
}

// docs/encoding.md's comment "receiver: in, _ := encoding.NewInput(pipeIn,
// decoder)", which TestSnippets does not compare.
func receiverEncoding(pipeIn *pipe.InputPipe, decoder *encoding.Decoder) {
	in, _ := encoding.NewInput(pipeIn, decoder)
	_ = in
}

// docs/jxta.md, "JXTA peers on JXTA's own transport".
func snippetJXTA(ctx context.Context, n *node.Node, keyFile string, a, b, c, d, e, f *adv.PipeAdvertisement) {
	ident, _ := jxtatcp.LoadIdentity(keyFile + ".jxta")
	ep, _ := endpoint.New(n, endpoint.WithJXTA(ident, "tcp://0.0.0.0:9711"))
	pipes, _ := pipe.New(ep)
	in, _ := pipes.NewInputPipe(a)
	out, _ := pipes.NewOutputPipe(ctx, b, pipe.ToJXTAPeers("tcp://10.0.0.5:9701"))

	l, _ := pipes.Listen(c)
	bidi, _ := pipes.Connect(ctx, d, pipe.ToJXTAPeers("tcp://10.0.0.5:9701"))

	sockets, _ := socket.New(pipes)
	ln, _ := sockets.Listen(e)
	conn, _ := sockets.Dial(ctx, f, pipe.ToJXTAPeers("tcp://10.0.0.5:9701"))
	// end of snippet
	_, _, _, _, _, _ = in, out, l, bidi, ln, conn
}

var _ = []any{snippetREADMEGoAPI, snippetEncoding, receiverEncoding, snippetJXTA}
