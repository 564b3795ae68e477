package cli

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
	"github.com/p2pmsg/p2pmsg/pkg/pathinfo"
)

// TestCalibrationOnProfileRequest: recv's pathinfo service measures its
// codecs when a peer first asks for its decode profile, once however many
// ask at once, and serves every one of them the profile measured; a probe
// of the path, which a sender runs before it asks, does not wait for the
// measurement. Before, the first pathinfo stream of any kind measured: the
// probe's bytes waited unread meanwhile, and a measurement of over a
// second had the sender read a loopback path at 0.3 MB/s rather than 400.
func TestCalibrationOnProfileRequest(t *testing.T) {
	var keys codecKeys
	if err := keys.load("", nil, nil); err != nil {
		t.Fatal(err)
	}
	reg, err := keys.registry()
	if err != nil {
		t.Fatal(err)
	}
	calib, err := calibrationRegistry(reg)
	if err != nil {
		t.Fatal(err)
	}
	models := adaptive.NewModels()
	var calls atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	measure := func() {
		calls.Add(1)
		close(started)
		<-release
		models.CalibrateDecode(calib)
	}
	nodes := testutil.NewConnectedNodes(t, 2)
	rcv, err := pathinfo.New(calibratingHost{nodes[0].Host(), new(sync.Once), measure}, models)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	snd, err := pathinfo.New(nodes[1].Host(), adaptive.NewModels())
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	// A hang guard only: on the old code the probe waited for the release.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	probed := make(chan error, 1)
	go func() { _, err := snd.Monitor(nodes[0].ID()).Probe(ctx); probed <- err }()
	select {
	case err := <-probed:
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
	case <-started:
		close(release)
		t.Fatalf("a probe made the receiver measure its codecs, and waited for it (then: %v)", <-probed)
	}

	const asking = 16
	profiles := make(chan []string, asking)
	for range asking {
		go func() {
			p, err := snd.Monitor(nodes[0].ID()).FetchProfile(ctx)
			if err != nil {
				t.Error(err)
				profiles <- nil
				return
			}
			profiles <- p.Codecs()
		}()
	}
	<-started
	close(release)
	want := []string{"deflate", "gzip", "identity", "s2", "xml", "zstd"}
	for range asking {
		if got := <-profiles; !slices.Equal(got, want) {
			t.Errorf("a sender asking during the measurement was served a profile of %v, want %v", got, want)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d senders asking at once: %d measurements, want 1", asking, n)
	}
}
