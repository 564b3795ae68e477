package pathinfo_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
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
	g, _ := gzip.New()
	reg, err := encoding.NewRegistry(z, g)
	if err != nil {
		t.Fatal(err)
	}
	rmodels.CalibrateDecode(reg, nil)
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
	_, rcv, ss, smodels, rmodels := pair(t, linkemu.Link{})
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
	// What was learned is in the models, under the peer's ID.
	r, ok := smodels.Peer(rcv.ID().String())
	if !ok || r.Path.Bandwidth != p.Bandwidth || r.Profile == nil {
		t.Fatalf("remembered %+v", r)
	}
	if ss.Monitor(rcv.ID()) != m {
		t.Fatal("a second monitor for the same peer")
	}
}

// With a fresh remembered path, Ensure only pings; a restarted node's
// monitor starts from what its models remember.
func TestEnsureUsesHistory(t *testing.T) {
	snd, rcv, ss, smodels, _ := pair(t, linkemu.Link{})
	m := ss.Monitor(rcv.ID())
	if err := m.Ensure(ctx(t)); err != nil {
		t.Fatal(err)
	}
	ss.Close()
	file := filepath.Join(t.TempDir(), adaptive.DefaultFile)
	if err := smodels.Save(file); err != nil {
		t.Fatal(err)
	}
	models, err := adaptive.Load(file) // as across a restart
	if err != nil {
		t.Fatal(err)
	}
	ss2, err := pathinfo.New(snd.Host(), models)
	if err != nil {
		t.Fatal(err)
	}
	defer ss2.Close()
	m2 := ss2.Monitor(rcv.ID())
	if m2.Path().Bandwidth <= 0 || m2.ReceiverProfile() == nil {
		t.Fatal("the restarted monitor forgot the path or the profile")
	}
	m2.SetPath(adaptive.Path{RTT: m2.Path().RTT, Bandwidth: 1e6}) // measured now, RTT as pinged
	if err := m2.Ensure(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if st := m2.Stats(); st.Pings == 0 || st.Profiles != 0 {
		t.Fatalf("stats %+v: want pings only", st)
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

// The watch loop probes again when exchanges say the link changed, and
// stops with the service.
func TestWatchReprobesOnChange(t *testing.T) {
	_, rcv, ss, _, _ := pair(t, linkemu.Link{})
	m := ss.Monitor(rcv.ID())
	m.SetPath(adaptive.Path{RTT: 100 * time.Microsecond, Bandwidth: 1e9})
	m.Watch(context.Background(), time.Hour)
	for range 3 {
		m.ObserveExchange(10_000_000, 10*time.Second) // 1 MB/s: far slower than thought
	}
	deadline := time.Now().Add(30 * time.Second)
	for m.Stats().Probes == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no probe after the change")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := ss.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	n := testutil.NewNode(t)
	for _, o := range []pathinfo.Option{pathinfo.WithMaxProbe(10), pathinfo.WithMaxProbe(pathinfo.MaxProbe + 1), pathinfo.WithMaxAge(-1)} {
		if _, err := pathinfo.New(n.Host(), adaptive.NewModels(), o); !errors.Is(err, pathinfo.ErrBadOption) {
			t.Fatalf("err %v, want ErrBadOption", err)
		}
	}
	if _, err := pathinfo.New(n.Host(), nil); !errors.Is(err, pathinfo.ErrBadOption) {
		t.Fatal("nil models accepted")
	}
}
