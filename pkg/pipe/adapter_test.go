package pipe_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/gzip"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/seal"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// The encoding layer's adapters on real pipes, as the Compression Pipe
// Adapter paper uses them: create the adapter, take its producer, create
// the elements to encode through it, send; the receiver's adapter gives
// back the original message.
func TestEncodingAdaptersOnPipes(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	a, in, out := unicast(t, newPipes(t, nodes[0]), newPipes(t, nodes[1]))
	gz := gzip.New()
	scheme, err := encoding.New([]encoding.Codec{gz}, encoding.WithPipeID(a.ID.String()))
	if err != nil {
		t.Fatal(err)
	}
	outA, err := encoding.NewOutput(out, scheme)
	if err != nil {
		t.Fatal(err)
	}
	doc := datasets.Employees(1000)
	prod := outA.Producer()
	m := message.New(message.Text("", "id", "42"), prod.XML("", "employees", doc), message.Text("", "note", "tiny"))
	if err := outA.Send(ctx(t), m); err != nil {
		t.Fatal(err)
	}
	// On the wire only the producer's element changed.
	raw, err := in.Receive(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !encoding.IsEncoded(raw.At(1)) || len(raw.At(1).Data) > len(doc)/4 {
		t.Fatalf("the XML element travelled as %s, %d bytes", raw.At(1).MIME, len(raw.At(1).Data))
	}
	if !raw.At(0).Equal(m.At(0)) || !raw.At(2).Equal(m.At(2)) {
		t.Fatal("unselected elements changed on the wire")
	}
	// The receiver's adapter restores it.
	outA.Send(ctx(t), m)
	inA, _ := encoding.NewInput(in, scheme)
	got, err := inA.Receive(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := got.Get("", "employees"); !bytes.Equal(e.Data, doc) || e.MIME != "text/xml;charset=UTF-8" {
		t.Fatalf("restored %s, %d bytes", e.MIME, len(e.Data))
	}
}

// TestSealedThroughRelay: compress-then-encrypt to the receiver's
// identity, over a bidirectional pipe that runs through a relay; the
// receiver opens it, and an element moved to another name does not.
func TestSealedBidiThroughRelay(t *testing.T) {
	_, b, sa, sb := relayed(t)
	ad := newAdv(t, adv.UnicastSecure)
	ad.Binders = []string{b.ID().String()}
	l, err := sb.Listen(ad)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan error, 1)
	var srvSide *encoding.Bidi
	go func() {
		c, err := l.Accept(ctx(t))
		if err == nil {
			defer c.Close()
			open, _ := seal.New(seal.WithIdentity(b.Host().Peerstore().PrivKey(b.ID())))
			reg, _ := encoding.NewRegistry(open, mustZstd(t))
			dec, _ := encoding.NewDecoder(encoding.WithRegistry(reg), encoding.WithPipeID(ad.ID.String()))
			srvSide, _ = encoding.NewBidi(c, dec)
			var m *message.Message
			if m, err = srvSide.Receive(ctx(t)); err == nil {
				err = c.Send(ctx(t), m) // echo it decoded, in the clear
			}
			if err == nil {
				_, err = srvSide.Receive(ctx(t)) // the tampered one
			}
		}
		accepted <- err
	}()
	c, err := sa.Connect(ctx(t), ad)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	to, _ := seal.New(seal.WithRecipient(b.Host().Peerstore().PubKey(b.ID())))
	scheme, err := encoding.New([]encoding.Codec{mustZstd(t), to}, encoding.WithPipeID(ad.ID.String()), encoding.WithSelector(encoding.ByName("secret")))
	if err != nil {
		t.Fatal(err)
	}
	cli, _ := encoding.NewBidi(c, scheme)
	secret := bytes.Repeat([]byte("attack at dawn "), 100)
	if err := cli.Send(ctx(t), message.New(message.Bytes("", "secret", secret), message.Text("", "public", "hi"))); err != nil {
		t.Fatal(err)
	}
	back, err := c.Receive(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := back.Get("", "secret"); !bytes.Equal(e.Data, secret) {
		t.Fatal("the receiver did not open the sealed element")
	}
	// Move a sealed element to another name: authentication fails.
	enc, _ := scheme.Encode(message.New(message.Bytes("", "secret", secret)))
	moved := message.New(message.Element{Name: "other", MIME: enc.At(0).MIME, Data: enc.At(0).Data})
	if err := c.Send(ctx(t), moved); err != nil {
		t.Fatal(err)
	}
	if err := <-accepted; !errors.Is(err, encoding.ErrAuth) {
		t.Fatalf("moved sealed element: %v, want encoding.ErrAuth", err)
	}
}

func mustZstd(t *testing.T) encoding.Codec {
	c, err := zstd.New()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSealedReplayOnPipe is issue 21's row 7 on a real pipe: a peer that
// captured a sealed element from one message puts it into a later message
// on the same pipe; the receiver refuses the replay.
func TestSealedReplayOnPipe(t *testing.T) {
	nodes := testutil.NewConnectedNodes(t, 2)
	sa, sb := newPipes(t, nodes[0]), newPipes(t, nodes[1])
	a := newAdv(t, adv.UnicastSecure)
	a.Binders = []string{nodes[1].ID().String()}
	in, err := sb.NewInputPipe(a)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := sa.NewOutputPipe(ctx(t), a)
	if err != nil {
		t.Fatal(err)
	}
	key := bytes.Repeat([]byte{9}, seal.KeySize)
	sealer, _ := seal.New(seal.WithPSK("team", key))
	opener, _ := seal.New(seal.WithPSK("team", key))
	scheme, _ := encoding.New([]encoding.Codec{sealer}, encoding.WithPipeID(a.ID.String()), encoding.WithSelector(encoding.ByName("order")))
	reg, _ := encoding.NewRegistry(opener)
	dec, _ := encoding.NewDecoder(encoding.WithRegistry(reg), encoding.WithPipeID(a.ID.String()),
		encoding.WithRequireSealed(encoding.ByName("order"), "psk:team"))
	inA, _ := encoding.NewInput(in, dec)
	first, err := scheme.Encode(message.New(message.Text("", "order", "pay 100"), message.Text("", "n", "1")))
	if err != nil {
		t.Fatal(err)
	}
	captured := first.At(0)
	later := message.New(captured, message.Text("", "n", "2")) // the same sealed element, replayed
	for _, m := range []*message.Message{first, later} {
		if err := out.Send(ctx(t), m); err != nil {
			t.Fatal(err)
		}
	}
	got, err := inA.Receive(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := got.Get("", "order"); string(e.Data) != "pay 100" {
		t.Fatalf("first message: %q", e.Data)
	}
	if _, err := inA.Receive(ctx(t)); !errors.Is(err, encoding.ErrReplay) {
		t.Fatalf("replayed sealed element: %v, want encoding.ErrReplay", err)
	}
	if opener.Replays() != 1 {
		t.Fatalf("%d replays counted", opener.Replays())
	}
}
