package pathinfo_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"go.uber.org/goleak"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/gzip"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pathinfo"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
	os.Exit(0)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// pair is a sender on an emulated link (none if zero) connected to a
// receiver, each with a pathinfo service and models; the receiver's
// profile covers zstd and gzip.
func pair(t *testing.T, link linkemu.Link) (snd, rcv *node.Node, ss *pathinfo.Service, smodels, rmodels *adaptive.Models) {
	t.Helper()
	var opts []node.Option
	if !link.Up.IsZero() {
		opts = append(opts, node.WithLibp2pOptions(libp2p.NoTransports, libp2p.Transport(linkemu.NewTCPTransport(link))))
	}
	snd, rcv = testutil.NewNode(t, opts...), testutil.NewNode(t)
	if err := snd.Connect(ctx(t), rcv.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	smodels, rmodels = adaptive.NewModels(), adaptive.NewModels()
	z, _ := zstd.New()
	g := gzip.New()
	reg, err := encoding.NewRegistry(z, g)
	if err != nil {
		t.Fatal(err)
	}
	rmodels.CalibrateDecode(reg)
	if ss, err = pathinfo.New(snd.Host(), smodels); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	rs, err := pathinfo.New(rcv.Host(), rmodels)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	return snd, rcv, ss, smodels, rmodels
}

// Probe and profile exchange over real nodes: what is asserted is what
// the protocol carries, not how long anything took.
func TestProbeAndProfileExchange(t *testing.T) {
	_, rcv, ss, _, rmodels := pair(t, linkemu.Link{})
	m := ss.Monitor(rcv.ID())
	if m.Path().Bandwidth > 0 || m.ReceiverProfile() != nil {
		t.Fatal("a new monitor knows something")
	}
	if err := m.Ensure(ctx(t)); err != nil {
		t.Fatal(err)
	}
	p := m.Path()
	if p.Bandwidth <= 0 || p.RTT <= 0 {
		t.Fatalf("after Ensure: %+v", p)
	}
	st := m.Stats()
	if st.Probes < 3 || st.Pings == 0 || st.Profiles != 1 {
		t.Fatalf("stats %+v: want probes, pings and one profile", st)
	}
	got, _ := m.ReceiverProfile().MarshalBinary()
	want, _ := rmodels.Profile().MarshalBinary()
	if string(got) != string(want) || len(m.ReceiverProfile().Codecs()) != 2 {
		t.Fatal("the profile received differs from the one served")
	}
	if ss.Monitor(rcv.ID()) != m {
		t.Fatal("a second monitor for the same peer")
	}
}

// onTransport is two nodes connected on the transport listening at
// listen, each with a pathinfo service and models, a's and b's.
func onTransport(t *testing.T, listen string) (sa, sb *pathinfo.Service, b *node.Node, bm *adaptive.Models) {
	t.Helper()
	a, b := testutil.NewNode(t, node.WithListenAddrs(listen)), testutil.NewNode(t, node.WithListenAddrs(listen))
	if err := a.Connect(ctx(t), b.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	sa, err := pathinfo.New(a.Host(), adaptive.NewModels())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sa.Close() })
	bm = adaptive.NewModels()
	if sb, err = pathinfo.New(b.Host(), bm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sa, sb, b, bm
}

// TestProbeOnQUIC: a probe over QUIC, where a Read may return a stream's
// last bytes together with its end. The receiver of the probe took that
// end for a failure and reset the stream, so `send --encode auto` over
// QUIC could not measure its path.
func TestProbeOnQUIC(t *testing.T) {
	sa, _, b, _ := onTransport(t, testutil.LoopbackQUIC)
	m := sa.Monitor(b.ID())
	for range 3 {
		if err := m.Ensure(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if p := m.Path(); p.Bandwidth <= 0 || p.RTT <= 0 || m.Stats().Probes < 3 {
		t.Fatalf("after Ensure: path %+v, stats %+v", p, m.Stats())
	}
}

// TestRequestWhenThePeerClosesFirst: a peer answers a profile request
// as soon as it has read it and closes the stream, which on QUIC stops
// the asker's sending; an asker that ends its side only after that (its
// goroutine descheduled in between) still takes the answer. Before the
// answer decided, its CloseWrite failed ("close called for canceled
// stream") and so did the request.
func TestRequestWhenThePeerClosesFirst(t *testing.T) {
	for _, tr := range []string{testutil.LoopbackQUIC, testutil.LoopbackTCP} {
		t.Run(tr, func(t *testing.T) {
			sa, _, b, bm := onTransport(t, tr)
			// Long enough for the answer and the close to arrive first
			// on loopback.
			got, err := sa.RequestProfile(ctx(t), b.ID(), func(io.Writer) error { time.Sleep(200 * time.Millisecond); return nil })
			if err != nil {
				t.Fatal(err)
			}
			if want, _ := bm.Profile().MarshalBinary(); string(got) != string(want) {
				t.Fatal("the profile received differs from the one served")
			}
		})
	}
}

// With a measured path, Ensure pings again (and probes only if the RTT
// moved, which on loopback it may), and fetches no profile again.
func TestEnsureTwice(t *testing.T) {
	_, rcv, ss, _, _ := pair(t, linkemu.Link{})
	m := ss.Monitor(rcv.ID())
	if err := m.Ensure(ctx(t)); err != nil {
		t.Fatal(err)
	}
	before := m.Stats()
	if err := m.Ensure(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); st.Pings == before.Pings || st.Profiles != before.Profiles || m.Path().Bandwidth <= 0 {
		t.Fatalf("stats %+v after %+v: want pings and no profile", st, before)
	}
}

// A peer without the protocol: the RTT from libp2p pings, no bandwidth,
// no profile, and no error.
func TestEnsureWithPeerWithoutPathinfo(t *testing.T) {
	snd, rcv := testutil.NewNode(t), testutil.NewNode(t)
	if err := snd.Connect(ctx(t), rcv.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	ss, err := pathinfo.New(snd.Host(), adaptive.NewModels())
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	m := ss.Monitor(rcv.ID())
	if err := m.Ensure(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if p := m.Path(); p.Bandwidth > 0 || p.RTT <= 0 {
		t.Fatalf("path %+v: want an RTT and no bandwidth", p)
	}
	if snd.Host().Peerstore().LatencyEWMA(rcv.ID()) <= 0 {
		t.Fatal("pings did not feed the peerstore's latency EWMA")
	}
	if _, err := m.FetchProfile(ctx(t)); err == nil {
		t.Fatal("fetched a profile from a peer without the protocol")
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	n := testutil.NewNode(t)
	if _, err := pathinfo.New(n.Host(), nil); !errors.Is(err, pathinfo.ErrBadOption) {
		t.Fatal("nil models accepted")
	}
}

// A misbehaving peer's answers are held to the protocol's bounds: a
// profile frame beyond adaptive.MaxProfileSize, a probe report beyond its
// size, a report that does not add up, and a profile that does not parse
// are refused, without reading what the frame claims.
func TestMisbehavingPeer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer []byte
		probe  bool
	}{
		{"profile frame too large", binary.AppendUvarint(nil, adaptive.MaxProfileSize+1), false},
		{"profile not a profile", append(binary.AppendUvarint(nil, 3), "{{{"...), false},
		{"report frame too large", binary.AppendUvarint(nil, 1<<20), true},
		{"report does not add up", append(binary.AppendUvarint(nil, 4), 5, 1, 1, 0), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snd, rcv := testutil.NewNode(t), testutil.NewNode(t)
			if err := snd.Connect(ctx(t), rcv.AddrInfo()); err != nil {
				t.Fatal(err)
			}
			rcv.Host().SetStreamHandler(pathinfo.ProtocolID, func(st network.Stream) {
				defer st.Close()
				io.Copy(io.Discard, st)
				st.Write(tc.answer)
			})
			ss, err := pathinfo.New(snd.Host(), adaptive.NewModels())
			if err != nil {
				t.Fatal(err)
			}
			defer ss.Close()
			m := ss.Monitor(rcv.ID())
			if tc.probe {
				_, err = m.Probe(ctx(t))
			} else {
				_, err = m.FetchProfile(ctx(t))
			}
			if !errors.Is(err, pathinfo.ErrProtocol) && !errors.Is(err, adaptive.ErrCorrupt) {
				t.Fatalf("err %v, want ErrProtocol or ErrCorrupt", err)
			}
		})
	}
}

// openProbe opens a probe stream from a hostile peer and writes only the
// request: the probe's bytes are the caller's to send, or not.
func openProbe(t *testing.T, from *node.Node, to *node.Node) network.Stream {
	t.Helper()
	st, err := from.Host().NewStream(ctx(t), to.ID(), pathinfo.ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	req := binary.AppendUvarint([]byte{1}, pathinfo.MaxProbe)
	if _, err := st.Write(binary.AppendUvarint(req, uint64(time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Reset() })
	return st
}

// refused reports whether the receiver reset st rather than let it wait:
// the deadline only keeps a failing test from hanging.
func refused(st network.Stream) bool {
	st.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := io.Copy(io.Discard, st)
	return errors.Is(err, network.ErrReset)
}

// waitFor polls cond until it holds or the test's context ends.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for c := ctx(t); !cond(); time.Sleep(5 * time.Millisecond) {
		if c.Err() != nil {
			t.Fatalf("never %s", what)
		}
	}
}

// A peer that opens probe streams and stalls holds the receiver to one
// probe at a time per peer and pathinfo.MaxProbing in all: the others are
// reset and counted.
func TestProbeLimits(t *testing.T) {
	rcv := testutil.NewNode(t)
	rs, err := pathinfo.New(rcv.Host(), adaptive.NewModels())
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	peers := make([]*node.Node, pathinfo.MaxProbing+1)
	for i := range peers {
		peers[i] = testutil.NewNode(t)
		if err := peers[i].Connect(ctx(t), rcv.AddrInfo()); err != nil {
			t.Fatal(err)
		}
	}
	openProbe(t, peers[0], rcv)
	waitFor(t, "served the first probe", func() bool { return rs.Stats().Served == 1 })
	if !refused(openProbe(t, peers[0], rcv)) {
		t.Fatal("a second probe of one peer was not refused")
	}
	for i := 1; i < pathinfo.MaxProbing; i++ {
		openProbe(t, peers[i], rcv)
	}
	waitFor(t, "served every peer's probe", func() bool { return rs.Stats().Served == pathinfo.MaxProbing })
	if !refused(openProbe(t, peers[pathinfo.MaxProbing], rcv)) {
		t.Fatal("a probe beyond the limit was not refused")
	}
	if s := rs.Stats(); s.Refused != 2 || s.Served != pathinfo.MaxProbing {
		t.Fatalf("stats %+v, want 2 refused", s)
	}
}

// A probe whose bytes stall or trickle is reset once a window of it does
// not arrive within the progress timeout, however large it claimed to be.
func TestProbeProgress(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trickle bool
	}{{"stall", false}, {"trickle", true}} {
		t.Run(tc.name, func(t *testing.T) {
			snd, rcv := testutil.NewNode(t), testutil.NewNode(t)
			if err := snd.Connect(ctx(t), rcv.AddrInfo()); err != nil {
				t.Fatal(err)
			}
			rs, err := pathinfo.NewWithProgressTimeout(rcv.Host(), adaptive.NewModels(), 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			st := openProbe(t, snd, rcv)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for tc.trickle {
					if _, err := st.Write([]byte{0}); err != nil {
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}()
			if !refused(st) {
				t.Fatal("a stalled probe was not reset")
			}
			st.Reset()
			<-done
		})
	}
}

// TestBandwidthLieCorrected: a peer answers every probe claiming the
// whole train arrived at once. A train cannot be timed below its shortest
// span, so the rate it gives is at most MaxProbe over that span, and the
// exchanges the adaptive scheme then reports (10 MiB acknowledged after
// 2 s, 5 MiB/s) correct it. (Believed, the lie — petabytes a second —
// predicted every exchange to take nanoseconds, too little to teach the
// rate, and stuck.)
func TestBandwidthLieCorrected(t *testing.T) {
	snd, liar := testutil.NewNode(t), testutil.NewNode(t)
	if err := snd.Connect(ctx(t), liar.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	liar.Host().SetStreamHandler(pathinfo.ProtocolID, func(st network.Stream) {
		defer st.Close()
		r := bufio.NewReader(st)
		if op, _ := r.ReadByte(); op != 1 { // ping or profile: nothing
			st.Reset()
			return
		}
		size, _ := binary.ReadUvarint(r)
		binary.ReadUvarint(r) // the gap
		io.Copy(io.Discard, r)
		var rep []byte
		// All received, the first read 1 byte, in 1 ns, one burst of it all.
		for _, v := range []uint64{size, 1, 1, 1, size, 0, 1} {
			rep = binary.AppendUvarint(rep, v)
		}
		st.Write(append(binary.AppendUvarint(nil, uint64(len(rep))), rep...))
	})
	ss, err := pathinfo.New(snd.Host(), adaptive.NewModels())
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	m := ss.Monitor(liar.ID())
	p, err := m.Probe(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("probed: %.3g bytes/s", p.Bandwidth)
	for range 20 {
		m.ObserveExchange(10<<20, 2*time.Second)
	}
	if bw := m.Path().Bandwidth; bw > 2*(5<<20) {
		t.Fatalf("bandwidth %.3g bytes/s after 20 exchanges at 5 MiB/s: the liar's still", bw)
	}
}

// A probe over a slow link cannot measure it faster than it is: the
// estimate stays under twice the uplink's rate (a physical bound, not a
// timing one: a loaded machine only makes a link look slower). TLS
// records arrive whole, so the receiver reads a slow link's train in
// lumps a record's serialization apart: the estimate took those gaps for
// idle time (dsl read 31× its rate), and a train of one record, read in
// a few milliseconds, for the link's pace (dialup 76×).
func TestProbeSlowLinkNotOverestimated(t *testing.T) {
	for _, name := range []string{"dsl", "dialup"} {
		t.Run(name, func(t *testing.T) {
			p, err := linkemu.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			_, rcv, ss, _, _ := pair(t, p.Link)
			m := ss.Monitor(rcv.ID())
			if err := m.Ensure(ctx(t)); err != nil {
				t.Fatal(err)
			}
			if bw, up := m.Path().Bandwidth, float64(p.Link.Up.Bandwidth); bw > 2*up {
				t.Errorf("%s uplink of %.0f B/s probed at %.0f B/s (%.1f×)", name, up, bw, bw/up)
			}
		})
	}
}
