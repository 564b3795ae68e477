package encoding_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"syscall"
	"testing"
	"time"

	kzstd "github.com/klauspost/compress/zstd"
	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/p2pmsg/p2pmsg/internal/identitycodec"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/gzip"
	_ "github.com/p2pmsg/p2pmsg/pkg/encoding/s2"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/seal"
	_ "github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

const testPipe = "urn:jxta:uuid-59616261646162614E50472050325033C0FFEE04"

// skippableFrame is a zstd skippable frame of n zero bytes.
func skippableFrame(n int) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0x184D2A50)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	return append(b, make([]byte, n)...)
}

// encodedBy wraps payload in an encoded element's header by hand, as a
// hostile peer would.
func encodedBy(codec string, p encoding.Params, mime string, size int, payload []byte) []byte {
	return append(encoding.AppendHeader(nil, encoding.Header{Codec: codec, Params: p, MIME: mime, Size: uint64(size)}), payload...)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestNestedBombBounded is issue 21's row 3: elements that are zstd
// frames wrapping another zstd element made of a 16 MiB skippable frame
// and a 1-byte frame. Nesting compression in compression is refused, so
// the message is refused after decoding one outer layer: at most 16 MiB of
// work, where the old decoder did 16 MiB per element.
func TestNestedBombBounded(t *testing.T) {
	z, _ := zstd.New(zstd.WithLevel(1))
	one, _ := z.Encode(nil, []byte("x"), encoding.Binding{})
	skip := skippableFrame(16<<20 - 256)
	inner := encodedBy("zstd", z.Params(), "text/plain", 1, append(skip, one...))
	outerPayload, _ := z.Encode(nil, inner, encoding.Binding{})
	outer := encodedBy("zstd", z.Params(), encoding.MIME, len(inner), outerPayload)
	m := message.New()
	for range 32 {
		m.Add(message.Element{Name: "bomb", MIME: encoding.MIME, Data: outer})
	}
	wireBytes, _ := wire.Marshal(m)
	var d *encoding.Decoder
	for _, policy := range []encoding.Policy{encoding.DropMessage, encoding.DeliverEncoded} {
		d, _ = encoding.NewDecoder(encoding.WithPolicy(policy))
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		cpu := cpuTime()
		_, err := d.Decode(m)
		cpu = cpuTime() - cpu
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("policy %d: %d wire bytes, 32 bombs: %v, %d MiB allocated, %v CPU", policy, len(wireBytes), err, alloc>>20, cpu)
		if policy == encoding.DropMessage && !errors.Is(err, encoding.ErrNesting) {
			t.Errorf("nested compression: %v, want ErrNesting", err)
		}
		// DropMessage stops at the first element; DeliverEncoded goes on
		// until the message's budget (64 MiB by default) is spent.
		limit := uint64(20 << 20)
		if policy == encoding.DeliverEncoded {
			limit = encoding.DefaultMaxMessageSize + 4<<20
		}
		if alloc > limit {
			t.Errorf("decoding allocated %d MiB, over %d MiB", alloc>>20, limit>>20)
		}
	}
	// One layer with the skippable frame: refused before decoding.
	d, _ = encoding.NewDecoder()
	single := message.New(message.Element{Name: "s", MIME: encoding.MIME, Data: encodedBy("zstd", z.Params(), "text/plain", 1, append(skippableFrame(1<<20), one...))})
	if _, err := d.Decode(single); !errors.Is(err, encoding.ErrCorrupt) {
		t.Errorf("skippable frame before the content: %v", err)
	}
	trailing := message.New(message.Element{Name: "s", MIME: encoding.MIME, Data: encodedBy("zstd", z.Params(), "text/plain", 1, append(bytes.Clone(one), one...))})
	if _, err := d.Decode(trailing); !errors.Is(err, encoding.ErrCorrupt) {
		t.Errorf("a second frame after the content: %v", err)
	}
}

// streamedFrame is a zstd frame of data as a streaming encoder writes it:
// without its content size.
func streamedFrame(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := kzstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// lyingMessage is a message of n encoded elements of 32 to 45 bytes whose
// headers claim just under 16 MiB each, in turn: a zstd frame that does
// not record its content size and holds one byte; an s2 block that claims
// 16 MiB and holds three bytes of garbage; an xml element in its
// plain-zstd mode whose frame claims 16 MiB and holds one byte.
func lyingMessage(t *testing.T, n int) *message.Message {
	const claim = 16<<20 - 1
	zel := encodedBy("zstd", encoding.Params{Level: 1}, "text/plain", claim, streamedFrame(t, []byte("x")))
	s2el := encodedBy("s2", encoding.Params{Level: 1}, "text/plain", claim, append(binary.AppendUvarint(nil, claim), 0xff, 0xff, 0xff))
	// xml's plain-zstd mode: mode 1, then a frame without its magic number,
	// single segment, its 8-byte content size, one raw block of 1 byte.
	xframe := append([]byte{1, 0xE0}, binary.LittleEndian.AppendUint64(nil, claim)...)
	xel := encodedBy("xml", encoding.Params{Level: 3}, "text/xml", claim, append(xframe, 9, 0, 0, 'x'))
	m := message.New()
	for i := range n {
		m.Add(message.Element{Name: "e", MIME: encoding.MIME, Data: [][]byte{zel, s2el, xel}[i%3]})
	}
	return m
}

// TestLyingSizesCostOnlyWhatArrives: encoded elements whose headers and
// payloads claim far more than they hold cost what they hold. Codecs made
// room for the claims before decoding (zstd for its header's claim when
// the frame records no size, s2 for its block's, xml for its frame's), and
// only the byte or nothing they produced was charged to the message's
// budget: one message of 200 such elements (16 KB on the wire) allocated
// 3 GiB. Now codecs make room for what their input can hold (a frame's
// blocks, a block's tags), and every layer a codec decodes costs its
// recorded size: with the default budget only four elements reach a
// codec, and with a budget that covers every claim, all 200 cost little.
func TestLyingSizesCostOnlyWhatArrives(t *testing.T) {
	const elems = 200
	m := lyingMessage(t, elems)
	wireBytes, _ := wire.Marshal(m)
	for _, tc := range []struct {
		name string
		opts []encoding.Option
	}{
		{"default budget", nil},
		{"budget for every claim", []encoding.Option{encoding.WithLimits(encoding.DefaultMaxElementSize, math.MaxInt)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refused := 0
			d, err := encoding.NewDecoder(append(tc.opts, encoding.WithPolicy(encoding.DeliverEncoded),
				encoding.WithErrorHandler(func(*encoding.ElementError) { refused++ }))...)
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			cpu := cpuTime()
			_, err = d.Decode(m)
			cpu = cpuTime() - cpu
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d wire bytes, %d lying elements: %d refused, %d KiB allocated, %v CPU", len(wireBytes), elems, refused, alloc>>10, cpu)
			if err != nil || refused != elems {
				t.Fatalf("Decode: %v, %d elements refused; want the message delivered with all %d left encoded", err, refused, elems)
			}
			// What arrives is 16 KB; what the claims add up to, 3 GiB.
			if alloc > 64<<20 {
				t.Fatalf("decoding %d lying elements (%d bytes on the wire) allocated %d MiB; want what they hold, not what they claim",
					elems, len(wireBytes), alloc>>20)
			}
		})
	}
}

// TestFailedLayersSpendTheBudget: a layer a codec was asked to decode
// costs the message's budget its recorded size whether it decodes or not,
// so elements that claim 1 MiB and hold a byte stop reaching the codec
// once the claims spend the budget (64 MiB: 64 of them), and the message
// is refused, as one whose elements held what they claim would be.
func TestFailedLayersSpendTheBudget(t *testing.T) {
	el := encodedBy("zstd", encoding.Params{Level: 1}, "text/plain", 1<<20, streamedFrame(t, []byte("x")))
	m := message.New()
	for range 100 {
		m.Add(message.Element{Name: "e", MIME: encoding.MIME, Data: el})
	}
	n := 0
	d, err := encoding.NewDecoder(encoding.WithPolicy(encoding.DeliverEncoded),
		encoding.WithDecodeWrap(func(c encoding.Codec) encoding.Codec { return countingCodec{c, &n} }))
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Decode(m)
	if want := encoding.DefaultMaxMessageSize / (1 << 20); n != want || !errors.Is(err, encoding.ErrCorrupt) {
		t.Fatalf("%d elements reached the codec, Decode: %v; want %d, then the message refused", n, err, want)
	}
}

// TestNesting: only compress, seal, or compress then seal.
func TestNesting(t *testing.T) {
	z, _ := zstd.New()
	g := gzip.New()
	sl, _ := seal.New(seal.WithPSK("k", bytes.Repeat([]byte{1}, seal.KeySize)))
	for _, tc := range []struct {
		name   string
		codecs []encoding.Codec
		err    error
	}{
		{"compress", []encoding.Codec{z}, nil},
		{"seal", []encoding.Codec{sl}, nil},
		{"compress then seal", []encoding.Codec{g, sl}, nil},
		{"other alone", []encoding.Codec{identitycodec.New()}, nil},
		{"compress twice", []encoding.Codec{z, g}, encoding.ErrNesting},
		{"seal then compress", []encoding.Codec{sl, z}, encoding.ErrNesting},
		{"seal twice", []encoding.Codec{sl, sl}, encoding.ErrNesting},
		{"other then seal", []encoding.Codec{identitycodec.New(), sl}, encoding.ErrNesting},
		{"three", []encoding.Codec{z, sl, sl}, encoding.ErrBadOption},
	} {
		_, err := encoding.New(tc.codecs, encoding.WithPipeID(testPipe))
		if !errors.Is(err, tc.err) && (tc.err != nil || err != nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
	// Seal around seal, by hand: refused at decoding too.
	s, _ := encoding.New([]encoding.Codec{sl}, encoding.WithPipeID(testPipe), encoding.WithSelector(encoding.ByName("a")))
	inner, err := s.EncodeElement(message.Text("", "a", "x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EncodeElement(inner); !errors.Is(err, encoding.ErrNesting) {
		t.Fatalf("encoding an encoded element: %v", err)
	}
	b := encoding.Binding{Name: "a", PipeID: testPipe}
	b.Header = encoding.AppendHeader(nil, encoding.Header{Codec: "seal", Params: sl.Params(), MIME: encoding.MIME, Size: uint64(len(inner.Data))})
	payload, err := sl.Encode(nil, inner.Data, b)
	if err != nil {
		t.Fatal(err)
	}
	twice := message.Element{Name: "a", MIME: encoding.MIME, Data: append(bytes.Clone(b.Header), payload...)}
	reg, _ := encoding.NewRegistry(sl)
	d, _ := encoding.NewDecoder(encoding.WithRegistry(reg), encoding.WithPipeID(testPipe))
	if _, err := d.Decode(message.New(twice)); !errors.Is(err, encoding.ErrNesting) {
		t.Fatalf("seal inside seal: %v", err)
	}
}

// TestRequireSealed is issue 21's row 7 (policy and report): a receiver
// requiring sealed elements refuses plain ones and ones sealed with other
// keys, and reports how each element was decoded.
func TestRequireSealed(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte{1}, seal.KeySize), bytes.Repeat([]byte{2}, seal.KeySize)
	s1, _ := seal.New(seal.WithPSK("k1", k1))
	s2, _ := seal.New(seal.WithPSK("k2", k2))
	both, _ := seal.New(seal.WithPSK("k1", k1), seal.WithPSK("k2", k2))
	z, _ := zstd.New()
	reg, _ := encoding.NewRegistry(both, z)
	d, err := encoding.NewDecoder(encoding.WithRegistry(reg), encoding.WithPipeID(testPipe),
		encoding.WithRequireSealed(encoding.ByName("secret"), "psk:k1"))
	if err != nil {
		t.Fatal(err)
	}
	sealWith := func(c encoding.Codec) *message.Message {
		s, _ := encoding.New([]encoding.Codec{z, c}, encoding.WithPipeID(testPipe), encoding.WithSelector(encoding.ByName("secret")))
		m, err := s.Encode(message.New(message.Text("", "secret", "attack at dawn"), message.Text("", "note", "hi")))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	plain := message.New(message.Text("", "secret", "attack at dawn"))
	zOnly, _ := encoding.New([]encoding.Codec{z}, encoding.WithSelector(encoding.ByName("secret")))
	zipped, _ := zOnly.Encode(plain)
	for name, m := range map[string]*message.Message{"plain": plain, "compressed only": zipped, "other key": sealWith(s2)} {
		if _, _, err := d.DecodeReport(m); !errors.Is(err, encoding.ErrPolicy) {
			t.Errorf("%s: %v, want ErrPolicy", name, err)
		}
	}
	got, reps, err := d.DecodeReport(sealWith(s1))
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := got.Get("", "secret"); string(e.Data) != "attack at dawn" {
		t.Fatalf("decoded %q", e.Data)
	}
	if len(reps) != 2 || reps[0].Name != "secret" || !reps[0].Sealed || reps[0].KeyID != "psk:k1" ||
		len(reps[0].Chain) != 2 || reps[0].Chain[0] != "zstd" || reps[0].Chain[1] != "seal" ||
		reps[1].Name != "note" || reps[1].Sealed || len(reps[1].Chain) != 0 {
		t.Fatalf("report %+v", reps)
	}
}

// TestSealedOnly: a receiver taking only what a key vouches for refuses
// a plain element wherever it is (in JXTA's namespace too), an empty
// message, and a message holding only exempt headers; it delivers a
// sealed message without its exempt headers, reporting each element at
// its place in the message it returns.
func TestSealedOnly(t *testing.T) {
	k := bytes.Repeat([]byte{1}, seal.KeySize)
	sender, _ := seal.New(seal.WithPSK("k", k))
	receiver, _ := seal.New(seal.WithPSK("k", k))
	reg, _ := encoding.NewRegistry(receiver)
	header := encoding.ByName("Hop")
	d, err := encoding.NewDecoder(encoding.WithRegistry(reg), encoding.WithPipeID(testPipe), encoding.WithSealedOnly(header, "psk:k"))
	if err != nil {
		t.Fatal(err)
	}
	hop := message.Text("jxta", "Hop", "tcp://192.0.2.1:9701")
	for name, m := range map[string]*message.Message{
		"plain in the jxta namespace": message.New(message.Text("jxta", "order", "wire 1,000,000 to Mallory")),
		"empty":                       message.New(),
		"exempt header only":          message.New(hop),
	} {
		if _, _, err := d.DecodeReport(m); !errors.Is(err, encoding.ErrPolicy) {
			t.Errorf("%s: %v, want ErrPolicy", name, err)
		}
	}
	s, _ := encoding.New([]encoding.Codec{sender}, encoding.WithPipeID(testPipe), encoding.WithSelector(encoding.ByName("x", "y")))
	m, err := s.Encode(message.New(hop, message.Text("", "x", "one"), hop, message.Text("", "y", "two")))
	if err != nil {
		t.Fatal(err)
	}
	got, reps, err := d.DecodeReport(m)
	if err != nil {
		t.Fatal(err)
	}
	if got.Len() != 2 || got.At(0).Name != "x" || string(got.At(1).Data) != "two" {
		t.Fatalf("delivered %v, want x and y without the headers", got.Elements())
	}
	if len(reps) != 2 || reps[0].Index != 0 || reps[0].Name != "x" || reps[1].Index != 1 || !reps[1].Sealed {
		t.Fatalf("report %+v", reps)
	}
	if m.Len() != 4 {
		t.Fatalf("Decode modified its argument: %d elements left", m.Len())
	}
	if _, err := encoding.NewDecoder(encoding.WithSealedOnly(nil), encoding.WithSealedOnly(nil)); !errors.Is(err, encoding.ErrBadOption) {
		t.Fatalf("WithSealedOnly twice: %v, want ErrBadOption", err)
	}
}

// FuzzSealedOnly: whatever message a peer sends, a receiver taking only
// what its key vouches for refuses it or returns only elements sealed
// with that key, at least one, reported at their places.
func FuzzSealedOnly(f *testing.F) {
	k := bytes.Repeat([]byte{1}, seal.KeySize)
	sender, _ := seal.New(seal.WithPSK("k", k))
	// Without replay protection, so that the seeds open on every run.
	receiver, _ := seal.New(seal.WithPSK("k", k), seal.WithoutReplayProtection())
	z, _ := zstd.New()
	reg, _ := encoding.NewRegistry(receiver, z)
	d, err := encoding.NewDecoder(encoding.WithRegistry(reg), encoding.WithPipeID(testPipe), encoding.WithPolicy(encoding.DeliverEncoded),
		encoding.WithSealedOnly(encoding.ByName("Hop"), "psk:k"))
	if err != nil {
		f.Fatal(err)
	}
	s, _ := encoding.New([]encoding.Codec{z, sender}, encoding.WithPipeID(testPipe), encoding.WithSelector(encoding.ByName("x")))
	zOnly, _ := encoding.New([]encoding.Codec{z}, encoding.WithPipeID(testPipe), encoding.WithSelector(encoding.ByName("x")))
	hop := message.Text("jxta", "Hop", "tcp://192.0.2.1:9701")
	for _, m := range []*message.Message{
		message.New(hop, message.Text("", "x", "one"), message.Text("jxta", "x", "two"), hop),
		message.New(message.Text("jxta", "order", "plain")),
		message.New(hop),
		message.New(),
	} {
		for _, sch := range []*encoding.Codecs{s, zOnly} {
			enc, err := sch.Encode(m)
			if err != nil {
				f.Fatal(err)
			}
			b, err := wire.Marshal(enc)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := wire.Unmarshal(data)
		if err != nil {
			return
		}
		got, reps, err := d.DecodeReport(m)
		if err != nil {
			return
		}
		if got.Len() == 0 || len(reps) != got.Len() {
			t.Fatalf("delivered %d elements with %d reports", got.Len(), len(reps))
		}
		for i, rep := range reps {
			if rep.Index != i || !rep.Sealed || rep.KeyID != "psk:k" || got.At(i).Name == "Hop" || encoding.IsEncoded(got.At(i)) {
				t.Fatalf("delivered element %d as %+v", i, rep)
			}
		}
	})
}

// TestRequiredKeyCheckedBeforeOpening: an element sealed to the
// receiver's identity (which anyone may do), sent to a receiver requiring
// its pre-shared key, is refused by its header before it is opened: it
// leaves no trace in the seal codec's replay window (it once did, so an
// element that key does not vouch for took the window's room).
func TestRequiredKeyCheckedBeforeOpening(t *testing.T) {
	priv, pub, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k := bytes.Repeat([]byte{1}, seal.KeySize)
	receiver, _ := seal.New(seal.WithPSK("k", k), seal.WithIdentity(priv))
	reg, _ := encoding.NewRegistry(receiver)
	strict, _ := encoding.NewDecoder(encoding.WithRegistry(reg), encoding.WithPipeID(testPipe), encoding.WithRequireSealed(encoding.ByName("x"), "psk:k"))
	lax, _ := encoding.NewDecoder(encoding.WithRegistry(reg), encoding.WithPipeID(testPipe))
	toPeer, _ := seal.New(seal.WithRecipient(pub))
	s, _ := encoding.New([]encoding.Codec{toPeer}, encoding.WithPipeID(testPipe), encoding.WithSelector(encoding.ByName("x")))
	m, err := s.Encode(message.New(message.Text("", "x", "hi")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := strict.Decode(m); !errors.Is(err, encoding.ErrPolicy) {
		t.Fatalf("strict receiver: %v, want ErrPolicy", err)
	}
	if _, err := lax.Decode(m); err != nil {
		t.Fatalf("the refused element had been opened and recorded: %v", err)
	}
}

// TestReplayRefused is issue 21's row 7 (replay): a sealed element opens
// once; the same element again, or one from below the window, is refused.
func TestReplayRefused(t *testing.T) {
	k := bytes.Repeat([]byte{1}, seal.KeySize)
	sender, _ := seal.New(seal.WithPSK("k", k))
	receiver, _ := seal.New(seal.WithPSK("k", k))
	reg, _ := encoding.NewRegistry(receiver)
	s, _ := encoding.New([]encoding.Codec{sender}, encoding.WithPipeID(testPipe), encoding.WithSelector(encoding.ByName("x")))
	d, _ := encoding.NewDecoder(encoding.WithRegistry(reg), encoding.WithPipeID(testPipe))
	var sent []*message.Message
	for i := range seal.ReplayWindow + 10 {
		m, err := s.Encode(message.New(message.Text("", "x", string(rune('a'+i%26)))))
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, m)
	}
	// Out of order within the window is fine, once.
	for _, i := range []int{1, 0, 3, 2} {
		if _, err := d.Decode(sent[i]); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if _, err := d.Decode(sent[2]); !errors.Is(err, encoding.ErrReplay) {
		t.Fatalf("replay: %v", err)
	}
	if _, err := d.Decode(sent[len(sent)-1]); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Decode(sent[5]); !errors.Is(err, encoding.ErrReplay) { // below the window now
		t.Fatalf("below the window: %v", err)
	}
	if receiver.Replays() != 2 {
		t.Fatalf("%d replays counted, want 2", receiver.Replays())
	}
}

// TestSealNeedsPipe: no silent unbound mode.
func TestSealNeedsPipe(t *testing.T) {
	sl, _ := seal.New(seal.WithPSK("k", bytes.Repeat([]byte{1}, seal.KeySize)))
	if _, err := encoding.New([]encoding.Codec{sl}, encoding.WithPipeID("")); !errors.Is(err, encoding.ErrBadOption) {
		t.Fatalf("empty pipe ID: %v", err)
	}
	s, _ := encoding.New([]encoding.Codec{sl}, encoding.WithSelector(encoding.ByName("x")))
	if _, err := s.Encode(message.New(message.Text("", "x", "y"))); !errors.Is(err, encoding.ErrUnbound) {
		t.Fatalf("sealing with no pipe: %v", err)
	}
	u, _ := encoding.New([]encoding.Codec{sl}, encoding.WithSelector(encoding.ByName("x")), encoding.WithoutPipeBinding())
	m, err := u.Encode(message.New(message.Text("", "x", "y")))
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := encoding.NewRegistry(sl)
	bound, _ := encoding.NewDecoder(encoding.WithRegistry(reg), encoding.WithPipeID(testPipe))
	if _, err := bound.Decode(m); !errors.Is(err, encoding.ErrAuth) {
		t.Fatalf("unbound element opened on a pipe: %v", err)
	}
	unbound, _ := encoding.NewDecoder(encoding.WithRegistry(reg))
	if _, err := unbound.Decode(m); !errors.Is(err, encoding.ErrUnbound) {
		t.Fatalf("decoder with no pipe: %v", err)
	}
}
