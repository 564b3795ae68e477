package pathinfo_test

import (
	"bytes"
	"encoding/binary"
	"sync/atomic"
	"testing"

	kzstd "github.com/klauspost/compress/zstd"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// pipes returns a pipe service on each node.
func pipes(t *testing.T, nodes ...*node.Node) []*pipe.Service {
	t.Helper()
	var out []*pipe.Service
	for _, n := range nodes {
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
		out = append(out, ps)
	}
	return out
}

// TestRefusedDecodesLeaveTheServedProfile: a receiver times its decodes
// into the profile it serves every sender over pathinfo (as recv does,
// adaptive.Models.TimeDecodes), and a hostile peer sends it elements
// whose header claims 16 MiB while their zstd frame, which records no
// content size, holds 128 KiB. The codec decoded the 128 KiB without
// error and its time was recorded, although the encoding layer then
// refused the element: forty such messages made the profile say zstd
// decodes 128 KiB fifteen times slower than it does, and honest senders'
// adaptive schemes weighed zstd by it. Now the profile an honest peer
// fetches is the same before and after.
func TestRefusedDecodesLeaveTheServedProfile(t *testing.T) {
	_, victim, hsvc, _, vmodels := pair(t, linkemu.Link{}) // an honest sender, the victim
	attacker := testutil.NewNode(t)
	if err := attacker.Connect(ctx(t), victim.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	dec, err := encoding.NewDecoder(vmodels.TimeDecodes())
	if err != nil {
		t.Fatal(err)
	}
	svcs := pipes(t, attacker, victim)
	a, err := adv.New(adv.Unicast, "victim", "")
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	in, err := svcs[1].NewInputPipe(a, pipe.WithHandler(func(r *pipe.Received) {
		if _, err := dec.Decode(r.Message); err != nil {
			refused.Add(1)
			r.Refuse("not decoded: " + err.Error())
		}
		r.Release()
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	fetch := func() []byte {
		p, err := hsvc.Monitor(victim.ID()).FetchProfile(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		b, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	before := fetch()

	var zbuf bytes.Buffer
	zw, _ := kzstd.NewWriter(&zbuf) // streaming: the frame records no content size
	zw.Write(bytes.Repeat([]byte("p2pmsg "), 128<<10/7))
	zw.Close()
	// The element's header, by hand: "P2E", version 1, codec, level,
	// dictionary ID, key ID, MIME type, original size.
	el := []byte("P2E\x01\x04zstd")
	el = binary.AppendVarint(el, 3)
	el = binary.AppendUvarint(el, 0)
	el = binary.AppendUvarint(el, 0)
	el = append(binary.AppendUvarint(el, uint64(len("text/plain"))), "text/plain"...)
	el = binary.AppendUvarint(el, 16<<20-1)
	el = append(el, zbuf.Bytes()...)
	out, err := svcs[0].NewOutputPipe(ctx(t), a, pipe.ToPeers(victim.AddrInfo()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	const msgs = 10
	for range msgs {
		if err := out.Send(ctx(t), message.New(message.Element{Name: "e", MIME: encoding.MIME, Data: el})); err != nil {
			t.Fatal(err)
		}
		if err := out.Flush(ctx(t)); err == nil { // the refusal, once the victim has decoded
			t.Fatal("the victim's refusal was not reported")
		}
	}
	if n := refused.Load(); n != msgs {
		t.Fatalf("the victim refused %d of %d messages, want all", n, msgs)
	}
	if after := fetch(); !bytes.Equal(after, before) {
		t.Fatalf("after %d messages the victim refused, the decode profile it serves changed:\nbefore %s\nafter  %s", msgs, before, after)
	}
}
