package pathinfo_test

import (
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
	for _, o := range []pathinfo.Option{pathinfo.WithMaxProbe(10), pathinfo.WithMaxProbe(pathinfo.MaxProbe + 1)} {
		if _, err := pathinfo.New(n.Host(), adaptive.NewModels(), o); !errors.Is(err, pathinfo.ErrBadOption) {
			t.Fatalf("err %v, want ErrBadOption", err)
		}
	}
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
