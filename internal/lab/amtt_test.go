package lab_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/internal/lab"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

func amttCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// The whole protocol between two real nodes over bidirectional pipes: every
// (codec, document) has a row, in order, with the paper's arithmetic.
func TestRunAMTTLoopback(t *testing.T) {
	var progress bytes.Buffer
	cfg := lab.AMTTConfig{
		Profile: "none",
		Codecs:  []string{lab.CodecNone, "gzip:6", "zstd:3", "s2"},
		Records: []int{1, 50},
		Trials:  3, Warmup: 1,
		Progress: &progress,
	}
	res, err := lab.RunAMTT(amttCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 8 {
		t.Fatalf("%d results, want 8: %+v", len(res), res)
	}
	for i, r := range res {
		codec, records := cfg.Codecs[i/2], cfg.Records[i%2]
		if r.Codec != codec || r.Records != records || r.Profile != "none" || r.Trials != 3 {
			t.Errorf("result %d is %+v, want %s on %d records", i, r, codec, records)
		}
		if r.Bytes != len(datasets.Employees(records)) {
			t.Errorf("%s/%d: %d bytes", codec, records, r.Bytes)
		}
		if r.ControlAMTT <= 0 || r.AMTT <= 0 {
			t.Errorf("%s/%d: non-positive AMTT %+v", codec, records, r)
		}
		if want := lab.Decrease(r.ControlAMTT, r.AMTT); r.DecreasePct != want {
			t.Errorf("%s/%d: decrease %v, want %v", codec, records, r.DecreasePct, want)
		}
		if codec == lab.CodecNone && (r.AMTT != r.ControlAMTT || r.DecreasePct != 0) {
			t.Errorf("none is not the control: %+v", r)
		}
		if r.ControlAMTT != res[i%2].ControlAMTT {
			t.Errorf("%s/%d: control %v differs from the shared control %v", codec, records, r.ControlAMTT, res[i%2].ControlAMTT)
		}
		// The noise beside the mean, and the size that crossed the link:
		// every measured trial lies in [min, max], the trimmed mean too.
		want, err := lab.EncodedSize(codec, records)
		if err != nil || r.EncodedBytes != want {
			t.Errorf("%s/%d: encoded %d bytes, want %d (%v)", codec, records, r.EncodedBytes, want, err)
		}
		for name, sp := range map[string]*lab.AMTTSpread{"control": r.ControlSpread, "codec": r.Spread} {
			mean := r.AMTT
			if name == "control" {
				mean = r.ControlAMTT
			}
			if sp == nil || sp.Min <= 0 || sp.Min > sp.Median || sp.Median > sp.Max || sp.StdDev < 0 ||
				mean < sp.Min || mean > sp.Max {
				t.Errorf("%s/%d: %s spread %+v around %v", codec, records, name, sp, mean)
			}
		}
		if codec == lab.CodecNone && *r.Spread != *r.ControlSpread {
			t.Errorf("none's spread %+v is not the control's %+v", r.Spread, r.ControlSpread)
		}
	}
	if !strings.Contains(progress.String(), "trial 4/4") || !strings.Contains(progress.String(), "left") {
		t.Errorf("progress does not report trials and time left:\n%s", progress.String())
	}
}

// Over an emulated link, neither message can beat physics: the control
// message's AMTT is at least its serialization on the uplink plus the
// round trip; the compressed one's at least the round trip.
func TestRunAMTTShapedLowerBound(t *testing.T) {
	link := linkemu.Link{
		Up:   linkemu.Shape{Bandwidth: 400_000, Latency: 4 * time.Millisecond},
		Down: linkemu.Shape{Bandwidth: 2_000_000, Latency: 4 * time.Millisecond, Jitter: time.Millisecond},
	}
	res, err := lab.RunAMTT(amttCtx(t), lab.AMTTConfig{
		Profile: "test", Link: link, Codecs: []string{"gzip"}, Records: []int{100}, Trials: 3, Warmup: -1, Seed: 7,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 {
		t.Fatalf("results %+v", res)
	}
	r := res[0]
	// The result says what the run was, to repeat it: a profile's name
	// alone does not.
	if r.Link != link || r.Seed != 7 || r.Warmup != 0 {
		t.Errorf("result records link %+v, seed %d, warm-up %d; want %+v, 7, 0", r.Link, r.Seed, r.Warmup, link)
	}
	if floor := link.Up.SerializationTime(r.Bytes) + link.RTT(); r.ControlAMTT < floor {
		t.Errorf("control AMTT %v below the physical floor %v", r.ControlAMTT, floor)
	}
	if r.AMTT < link.RTT() {
		t.Errorf("gzip AMTT %v below the round trip %v", r.AMTT, link.RTT())
	}
}

// A link too slow for a libp2p connection's setup within the 5 s libp2p
// gives a dial to a local address still connects: the link emulates a
// wide-area path, and its dials get the wide-area bound (before, 2.4
// kbit/s down failed, "all dials failed"). One slower than that even
// says why it failed.
func TestAMTTPeerSlowLinkConnects(t *testing.T) {
	connect := func(ctx context.Context, link linkemu.Link) error {
		comm, data, err := lab.NewAMTTAdvs()
		if err != nil {
			t.Fatal(err)
		}
		rcv, err := lab.NewAMTTPeer(ctx, linkemu.Link{}, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		defer rcv.Close()
		snd, err := lab.NewAMTTPeer(ctx, link, 1, "")
		if err != nil {
			t.Fatal(err)
		}
		defer snd.Close()
		if err := rcv.Listen(comm, data); err != nil {
			t.Fatal(err)
		}
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		accepted := make(chan error, 1)
		go func() { _, err := rcv.Accept(actx); accepted <- err }()
		_, err = snd.Connect(ctx, comm, data, rcv.Node.AddrInfo())
		if err != nil {
			cancel()
		}
		if aerr := <-accepted; err == nil {
			err = aerr
		}
		return err
	}
	t.Run("connects", func(t *testing.T) {
		t.Parallel()
		if err := connect(amttCtx(t), linkemu.Link{Down: linkemu.Shape{Bandwidth: 300}}); err != nil {
			t.Fatalf("2.4 kbit/s down: %v", err)
		}
	})
	t.Run("says why not", func(t *testing.T) {
		t.Parallel()
		// Down, not up: closing a connection lets what it sent drain at
		// up's rate, here longer than the test.
		err := connect(amttCtx(t), linkemu.Link{Down: linkemu.Shape{Bandwidth: 100}})
		if err == nil || !strings.Contains(err.Error(), "the link (unlimited up, 800bit/s down, 0s RTT) may be too slow to set up a libp2p connection") {
			t.Fatalf("800 bit/s down: %v, want the link named too slow", err)
		}
	})
}

func TestAMTTConfigErrors(t *testing.T) {
	for name, cfg := range map[string]lab.AMTTConfig{
		"too few trials": {Trials: 2},
		"unknown codec":  {Codecs: []string{"lzma"}},
		"codec twice":    {Codecs: []string{"gzip", "gzip"}},
		"zero records":   {Records: []int{0}},
		"too many":       {Records: []int{datasets.MaxEmployees + 1}},
		"records twice":  {Records: []int{1, 50, 1}},
		"negative link":  {Link: linkemu.Link{Up: linkemu.Shape{Bandwidth: -1}}},
	} {
		if _, err := lab.RunAMTT(context.Background(), cfg); !errors.Is(err, lab.ErrAMTTConfig) {
			t.Errorf("%s: err = %v, want ErrAMTTConfig", name, err)
		}
	}
}

// memPipe is one end of an in-memory bidirectional pipe. refuse, if
// set, says which messages its Send fails to send, and with what error.
type memPipe struct {
	in, out chan *message.Message
	tamper  func(*message.Message) *message.Message
	refuse  func(*message.Message) error
}

func memPipes() (a, b *memPipe) {
	x, y := make(chan *message.Message, 4), make(chan *message.Message, 4)
	return &memPipe{in: x, out: y}, &memPipe{in: y, out: x}
}

func (p *memPipe) Send(ctx context.Context, m *message.Message) error {
	if p.tamper != nil {
		m = p.tamper(m)
	}
	if p.refuse != nil {
		if err := p.refuse(m); err != nil {
			return err
		}
	}
	select {
	case p.out <- m:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *memPipe) Receive(ctx context.Context) (*message.Message, error) {
	select {
	case m := <-p.in:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// The receiver acknowledges only what decodes to the document: a message
// damaged on the data pipe fails the run on both sides.
func TestAMTTReceiverChecksDocument(t *testing.T) {
	sc, rc := memPipes()
	sd, rd := memPipes()
	sd.tamper = func(m *message.Message) *message.Message {
		m = m.Clone()
		i := m.Index("amtt", "doc")
		e := m.At(i)
		dec, err := encoding.DecodeElement(e, 1<<20, encoding.WithoutPipeBinding())
		if err != nil {
			t.Error(err)
			return m
		}
		dec.Data = append(bytes.Clone(dec.Data[:len(dec.Data)-1]), 'X')
		m.Set(i, dec)
		return m
	}
	ctx := amttCtx(t)
	served := make(chan error, 1)
	go func() { served <- lab.ServeAMTTReceiver(ctx, lab.AMTTPipes{Comm: rc, Data: rd}) }()
	_, err := lab.RunAMTTSender(ctx, lab.AMTTConfig{Codecs: []string{"gzip"}, Records: []int{1}, Trials: 3}, lab.AMTTPipes{Comm: sc, Data: sd})
	if !errors.Is(err, lab.ErrAMTTProtocol) {
		t.Errorf("sender: err = %v, want ErrAMTTProtocol", err)
	}
	if err := <-served; !errors.Is(err, lab.ErrAMTTProtocol) || !strings.Contains(err.Error(), "differs") {
		t.Errorf("receiver: err = %v, want a document mismatch", err)
	}
}

// The receiver refuses a peer that does not speak the protocol.
func TestAMTTReceiverHandshake(t *testing.T) {
	sc, rc := memPipes()
	_, rd := memPipes()
	ctx := amttCtx(t)
	sc.Send(ctx, message.New(message.Text("amtt", "op", "hello"), message.Text("amtt", "version", "99")))
	if err := lab.ServeAMTTReceiver(ctx, lab.AMTTPipes{Comm: rc, Data: rd}); !errors.Is(err, lab.ErrAMTTProtocol) {
		t.Fatalf("err = %v, want ErrAMTTProtocol", err)
	}
	m, err := sc.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := m.Get("amtt", "op"); string(e.Data) != "error" {
		t.Fatalf("receiver answered %q, want error", e.Data)
	}
}

// A receiver that cannot tell the sender it is ready for a new document
// stops with that error. Before, the error of that one Send was dropped,
// and the receiver waited for messages the sender would never send.
func TestAMTTReceiverSendFails(t *testing.T) {
	sc, rc := memPipes()
	_, rd := memPipes()
	errLink := errors.New("link down")
	readies := 0
	rc.refuse = func(m *message.Message) error {
		if e, _ := m.Get("amtt", "op"); string(e.Data) == "ready" {
			if readies++; readies > 1 { // the handshake's goes through
				return errLink
			}
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang detector
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- lab.ServeAMTTReceiver(ctx, lab.AMTTPipes{Comm: rc, Data: rd}) }()
	sc.Send(ctx, message.New(message.Text("amtt", "op", "hello"), message.Text("amtt", "version", "1"), message.Text("amtt", "codecs", "gzip")))
	if m, err := sc.Receive(ctx); err != nil {
		t.Fatal(err)
	} else if e, _ := m.Get("amtt", "op"); string(e.Data) != "ready" {
		t.Fatalf("receiver answered the hello with %q", e.Data)
	}
	sc.Send(ctx, message.New(message.Text("amtt", "op", "set"), message.Text("amtt", "records", "1")))
	if err := <-served; !errors.Is(err, errLink) {
		t.Fatalf("receiver: err = %v, want the failed Send's", err)
	}
}

func TestDecrease(t *testing.T) {
	for _, c := range []struct {
		control, amtt time.Duration
		want          float64
	}{
		{100, 18, 82}, {100, 103, -3}, {0, 5, 0}, {504650, 503410, 100 * 1240.0 / 504650},
	} {
		if got := lab.Decrease(c.control, c.amtt); got != c.want {
			t.Errorf("Decrease(%v, %v) = %v, want %v", c.control, c.amtt, got, c.want)
		}
	}
}

var sampleResults = []lab.AMTTResult{
	{Profile: "dsl", Codec: "none", Records: 1, Bytes: 254, Trials: 5, ControlAMTT: 64 * time.Millisecond, AMTT: 64 * time.Millisecond,
		Link: mustLookup("dsl").Link, Warmup: 1, Seed: 1},
	{Profile: "dsl", Codec: "none", Records: 1000, Bytes: 172491, Trials: 5, ControlAMTT: 2200 * time.Millisecond, AMTT: 2200 * time.Millisecond},
	{Profile: "dsl", Codec: "gzip", Records: 1, Bytes: 254, Trials: 5, ControlAMTT: 64 * time.Millisecond, AMTT: 63 * time.Millisecond, DecreasePct: 1.5625},
	{Profile: "dsl", Codec: "gzip", Records: 1000, Bytes: 172491, Trials: 5, ControlAMTT: 2200 * time.Millisecond, AMTT: 330 * time.Millisecond, DecreasePct: 85},
	{Profile: "lan", Codec: "gzip", Records: 1000, Bytes: 172491, Trials: 5, ControlAMTT: 15 * time.Millisecond, AMTT: 5 * time.Millisecond, DecreasePct: 66.7},
}

func TestAMTTJSONRoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := lab.WriteAMTTJSON(&b, sampleResults); err != nil {
		t.Fatal(err)
	}
	first := strings.SplitN(b.String(), "\n", 2)[0]
	want := `{"profile":"dsl","codec":"none","records":1,"bytes":254,"trials":5,"control_amtt_ns":64000000,"amtt_ns":64000000,"decrease_pct":0,` +
		`"link":{"up":{"bandwidth_Bps":80000,"latency_ns":30000000,"jitter_ns":0,"queue_limit":0},"down":{"bandwidth_Bps":375000,"latency_ns":30000000,"jitter_ns":0,"queue_limit":0}},"warmup":1,"seed":1}`
	if first != want {
		t.Errorf("JSON line\n%s\nwant\n%s", first, want)
	}
	got, err := lab.ReadAMTTJSON(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(sampleResults) || got[3] != sampleResults[3] {
		t.Fatalf("round trip: %+v", got)
	}
	if _, err := lab.ReadAMTTJSON(strings.NewReader("{\n")); err == nil {
		t.Fatal("bad JSON accepted")
	}
}

func TestAMTTMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := lab.WriteAMTTMarkdown(&b, sampleResults); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"#### dsl (ADSL", "#### lan (", "| records | bytes | trials | control (ms) | gzip (ms) | gzip % decrease |",
		"| 1000 | 172491 | 5 | 2200.00 | 330.00 | +85.0% |", "| 1 | 254 | 5 | 64.00 | 63.00 | +1.6% |",
		"Encoded element size",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, out)
		}
	}
}

func TestAMTTChart(t *testing.T) {
	var b bytes.Buffer
	if err := lab.WriteAMTTChart(&b, sampleResults); err != nil {
		t.Fatal(err)
	}
	// Well-formed XML, an SVG, with both panels and the legend.
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	var root string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q", root)
	}
	for _, want := range []string{"AMTT on dsl", "AMTT on lan", "none (control)", "gzip"} {
		if !bytes.Contains(b.Bytes(), []byte(want)) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if err := lab.WriteAMTTChart(io.Discard, nil); err == nil {
		t.Error("empty chart accepted")
	}
}

func mustLookup(name string) linkemu.Profile {
	p, err := linkemu.Lookup(name)
	if err != nil {
		panic(err)
	}
	return p
}
