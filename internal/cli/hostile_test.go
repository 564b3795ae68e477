package cli_test

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
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
	if got := recv.stdout.String(); !strings.HasPrefix(got, "message 1 from ") || !strings.Contains(got, "(1 element)") ||
		!strings.Contains(got, ": sealed\n") || strings.Contains(got, "Mallory") || strings.Contains(got, "jxta:") {
		t.Fatalf("recv printed %q, want only the sealed message", got)
	}
}

// x25519Of maps an Ed25519 libp2p public key to its X25519 form, as
// package seal documents (u = (1+y)/(1-y) mod 2^255-19).
func x25519Of(t *testing.T, pub crypto.PubKey) *ecdh.PublicKey {
	t.Helper()
	raw, err := pub.Raw()
	if err != nil {
		t.Fatal(err)
	}
	p, _ := new(big.Int).SetString("7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffed", 16)
	le := bytes.Clone(raw)
	le[31] &= 0x7f
	for i, j := 0, 31; i < j; i, j = i+1, j-1 {
		le[i], le[j] = le[j], le[i]
	}
	y := new(big.Int).SetBytes(le)
	num := new(big.Int).Add(big.NewInt(1), y)
	den := new(big.Int).Sub(big.NewInt(1), y)
	den.Mod(den, p)
	u := num.Mul(num, den.ModInverse(den, p))
	u.Mod(u, p)
	out := u.FillBytes(make([]byte, 32))
	for i, j := 0, 31; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	k, err := ecdh.X25519().NewPublicKey(out)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func appendLP(dst, s []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// sealToPeer seals plain to the peer whose X25519 key is to, as package
// seal's per-recipient mode does (anyone may seal to a public key), with a
// stream, counter and seal time of the sender's choosing.
func sealToPeer(t *testing.T, to *ecdh.PublicKey, keyID string, e message.Element, pipeID string, stream [8]byte, ctr, sealedAt uint64) []byte {
	t.Helper()
	// The encoded element's header: magic, codec, level, dictionary ID,
	// key ID, original MIME type and size.
	h := appendLP([]byte("P2E\x01"), []byte("seal"))
	h = binary.AppendVarint(h, 0)
	h = binary.AppendUvarint(h, 0)
	h = appendLP(h, []byte(keyID))
	h = appendLP(h, []byte(e.MIME))
	h = binary.AppendUvarint(h, uint64(len(e.Data)))
	eph, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	shared, err := eph.ECDH(to)
	if err != nil {
		t.Fatal(err)
	}
	pub := eph.PublicKey().Bytes()
	key, err := hkdf.Key(sha256.New, shared, append(bytes.Clone(pub), to.Bytes()...), "p2pmsg-seal-x25519-v1", chacha20poly1305.KeySize)
	if err != nil {
		t.Fatal(err)
	}
	seq := binary.BigEndian.AppendUint64(stream[:], ctr)
	seq = binary.BigEndian.AppendUint64(seq, sealedAt)
	ad := appendLP([]byte("p2pmsg-seal-v2"), []byte(e.Namespace))
	ad = appendLP(ad, []byte(e.Name))
	ad = appendLP(ad, []byte(pipeID))
	ad = append(appendLP(ad, h), seq...)
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		t.Fatal(err)
	}
	nonce := make([]byte, chacha20poly1305.NonceSizeX)
	rand.Read(nonce)
	out := append(append(append(h, pub...), seq...), nonce...)
	return aead.Seal(out, nonce, e.Data, ad)
}

// TestRecvPSKNotLockedOutBySealedFlood: a peer holding no key seals
// elements to recv's identity (anyone may), 4,200 of them in one message,
// each from a made-up stream and dated a year ahead. The opener's replay
// table held 4,096 streams for all keys with one floor: forgetting the
// attacker's streams raised the floor to next year, and every honest
// `send --encode zstd,seal --psk` was refused as a replay until recv
// restarted. Now recv --psk refuses the attacker's elements by their key
// before opening them, seal refuses seal times more than ReplayMaxSkew
// ahead, and each key has its own streams and floor.
func TestRecvPSKNotLockedOutBySealedFlood(t *testing.T) {
	advFile := newPipeAdv(t, "unicast")
	psk := writeFile(t, "psk", []byte(strings.Repeat("ab", 32)))
	recv := start(t, nil, "recv", "--pipe", advFile, "--listen", loopback, "--psk", psk)
	honest := func() result {
		return run(t, nil, "send", "--pipe", advFile, "--peer", recv.addrs[0], "--elem", "x=hello", "--encode", "zstd,seal", "--psk", psk)
	}
	if r := honest(); r.code != 0 {
		t.Fatalf("before the attack: honest send: %s", r.stderr)
	}

	info, err := peer.AddrInfoFromString(recv.addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	pub, err := info.ID.ExtractPublicKey()
	if err != nil {
		t.Fatal(err)
	}
	to, pipeID := x25519Of(t, pub), readAdv(t, advFile).ID.String()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := newHostilePeer(t).outputTo(ctx, t, advFile, recv.addrs[0])
	nextYear := uint64(time.Now().Add(365 * 24 * time.Hour).Unix())
	const streams = 4200 // more than seal.ReplayStreams (4,096)
	m := message.New()
	for range streams {
		var stream [8]byte
		rand.Read(stream[:])
		plain := message.Text(message.JXTANamespace, "z", "x")
		m.Add(message.Element{Namespace: plain.Namespace, Name: plain.Name, MIME: encoding.MIME,
			Data: sealToPeer(t, to, "peer:"+info.ID.String(), plain, pipeID, stream, 1, nextYear)})
	}
	if err := out.Send(ctx, m); err != nil {
		t.Fatalf("attacker's send: %v", err)
	}
	if err := out.Flush(ctx); !errors.Is(err, endpoint.ErrRefused) {
		t.Errorf("attacker's flush: %v, want its message refused", err)
	}
	for i := range 3 {
		if r := honest(); r.code != 0 {
			t.Fatalf("after the attack, honest send %d was refused: %s", i+1, bytes.TrimSpace(r.stderr))
		}
	}
}

// TestSendExitStatusNotChosenByPeer: a receiving peer refuses send's
// message with a reason of its choosing, which reaches send's error line.
// Main once took any error whose text held "flag" or "arg(s)" for a usage
// error, so the reason "I raise a red flag" made send exit 2 ("the
// command line was wrong", not worth retrying) instead of 1. The exit
// status goes by the error's type alone.
func TestSendExitStatusNotChosenByPeer(t *testing.T) {
	advFile := newPipeAdv(t, "unicast")
	h := newHostilePeer(t)
	in, err := h.pipes.NewInputPipe(readAdv(t, advFile), pipe.WithHandler(func(r *pipe.Received) {
		r.Refuse("I raise a red flag: accepts 1 arg(s), unknown command")
		r.Release()
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	r := run(t, nil, "send", "--pipe", advFile, "--peer", h.node.Addrs()[0].String(), "--elem", "x=hello")
	failsCleanly(t, r)
	if r.code != 1 || !strings.Contains(string(r.stderr), "red flag") {
		t.Fatalf("send to a peer refusing its message exited %d (%q), want 1 with the peer's reason", r.code, r.stderr)
	}
}

// TestRecvSocketJXTACloseWithGap: a JXTA peer opens a JxtaSocket to
// recv --socket by hand, sends blocks 1 and 3 of its stream, never 2, and
// closes (JXSE closes only once every block is acknowledged): recv exits
// 1 saying the peer ended with data missing, instead of 0 with the first
// block alone as if it were the whole stream.
func TestRecvSocketJXTACloseWithGap(t *testing.T) {
	advFile := newPipeAdv(t, "unicast")
	out, err := os.Create(t.TempDir() + "/out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	recv := startTo(t, nil, out, "recv", "--socket", "--pipe", advFile, "--listen", loopback, "--jxta", "tcp://127.0.0.1:0")
	jxtaAddr, _ := recv.jxtaAddr()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ident, err := jxtatcp.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	answers := make(chan *message.Message, 4)
	h, err := jxtatcp.New(ident, func(in *jxtatcp.Incoming) {
		if _, ok := in.Message.Get("JXTASOC", "remPipe"); ok {
			select {
			case answers <- in.Message:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	mine, _ := adv.New(adv.Unicast, "hostile.remote", "")
	mineXML, _ := mine.Marshal()
	pa := `<?xml version="1.0" encoding="UTF-8"?><jxta:PA xmlns:jxta="http://jxta.org"><PID>` + ident.ID().String() + `</PID></jxta:PA>`
	send := func(to string, m *message.Message) {
		t.Helper()
		if err := h.Send(ctx, jxtaAddr, pipe.JXTAPipeService, to, m); err != nil {
			t.Fatal(err)
		}
	}
	send(readAdv(t, advFile).ID.String(), message.New(
		message.Element{Namespace: "JXTASOC", Name: "reqPipe", MIME: message.XMLUTF8, Data: mineXML},
		message.Element{Namespace: "JXTASOC", Name: "remPeer", MIME: message.XMLUTF8, Data: []byte(pa)},
		message.Text("JXTASOC", "stream", "true")))
	var serverPipe string
	select {
	case m := <-answers:
		e, _ := m.Get("JXTASOC", "remPipe")
		rp, err := adv.Parse(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		serverPipe = rp.ID.String()
	case <-ctx.Done():
		t.Fatal("no connect response")
	}
	block := func(seq, data string) *message.Message {
		return message.New(message.Element{Namespace: "jxtarel", Name: seq, MIME: "application/x-jxta-reliable-block", Data: []byte(data)})
	}
	send(serverPipe, block("1", "head\n"))
	send(serverPipe, block("3", "tail\n")) // block 2 never sent
	send(serverPipe, message.New(message.Text("JXTASOC", "close", "close")))
	code := recv.wait(t)
	got, _ := os.ReadFile(out.Name())
	stderr := strings.Join(recv.stderr, "\n")
	t.Logf("exit %d, output %q, stderr %q", code, got, stderr)
	if code != 1 || !strings.Contains(stderr, "p2pmsg: the peer ended its stream with data missing: ") {
		t.Fatalf("recv --socket from a peer that closed with block 2 missing: exit %d, stderr %q; want 1 and the cause", code, stderr)
	}
}

// TestRecvLinesBoundedOverIdentities: peers that each make up a new
// libp2p identity (they cost nothing) and send `recv --psk` one message
// it refuses have at most 100 lines written about them in 10 s, the rest
// counted in one line; every refusal is accounted for. Before, the bound
// was a line per sending peer every 10 s, and each identity had its line
// (1,100 identities: 1,200 lines in 5 s).
func TestRecvLinesBoundedOverIdentities(t *testing.T) {
	const identities, workers = 130, 8
	advFile := newPipeAdv(t, "unicast")
	psk := writeFile(t, "psk", []byte(strings.Repeat("ab", 32)))
	recv := start(t, nil, "recv", "--pipe", advFile, "--listen", loopback, "--psk", psk)
	info, err := peer.AddrInfoFromString(recv.addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	a := readAdv(t, advFile)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sendAs := func() error { // a fresh identity, one plain message
		n, err := node.New(ctx, node.WithEphemeralKey(), node.WithListenAddrs(), node.WithLibp2pOptions(libp2p.NoListenAddrs))
		if err != nil {
			return err
		}
		defer n.Close()
		ep, err := endpoint.New(n)
		if err != nil {
			return err
		}
		defer ep.Close()
		ps, err := pipe.New(ep)
		if err != nil {
			return err
		}
		defer ps.Close()
		out, err := ps.NewOutputPipe(ctx, a, pipe.ToPeers(*info))
		if err != nil {
			return err
		}
		defer out.Close()
		if err := out.Send(ctx, message.New(message.Text("", "x", "plain"))); err != nil {
			return err
		}
		var ue *pipe.UndeliveredError
		if err := out.Flush(ctx); !errors.As(err, &ue) {
			return fmt.Errorf("flush: %v, want the receiver's refusal", err)
		}
		return nil
	}
	began := time.Now()
	jobs, errs := make(chan struct{}), make(chan error, identities)
	for range workers {
		go func() {
			for range jobs {
				errs <- sendAs()
			}
		}()
	}
	for range identities {
		jobs <- struct{}{}
	}
	close(jobs)
	for range identities {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(began)
	recv.cmd.Process.Signal(syscall.SIGINT)
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv exit %d: %q", code, recv.stderr)
	}
	written, counted := 0, 0
	for _, l := range recv.stderr {
		if strings.Contains(l, " refused: ") {
			written++
		}
		var n int
		if _, err := fmt.Sscanf(l, "p2pmsg: %d more lines like these not written", &n); err == nil {
			counted += n
		}
	}
	if written+counted != identities {
		t.Fatalf("%d refusals written and %d counted, want %d in all", written, counted, identities)
	}
	// The first line opens a window of 10 s: all within it, at most 100
	// are written. (A machine too slow for that still accounts for every
	// refusal, checked above.)
	if elapsed < 10*time.Second && written > 100 {
		t.Fatalf("%d refusals within %v: %d lines written, want at most 100", identities, elapsed.Round(time.Millisecond), written)
	}
	t.Logf("%d identities in %v: %d lines written, %d counted", identities, elapsed.Round(time.Millisecond), written, counted)
}
