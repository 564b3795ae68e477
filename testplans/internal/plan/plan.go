// Package plan holds what p2pmsg's Testground plans share: the link
// parameters' names, shaping the link (through the sidecar's
// network.Config when the run has one, in process with pkg/linkemu when it
// does not), listen addresses and output files. The experiments themselves
// are internal/lab's and internal/swarm's, the same engines `p2pmsg lab`
// runs; this package imports neither, so a plan links only the engine it
// runs (reading a link profile, which needs internal/lab, is planlink's).
package plan

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/testground/sdk-go/network"
	"github.com/testground/sdk-go/run"
	"github.com/testground/sdk-go/runtime"
	"github.com/testground/sdk-go/sync"

	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
)

// Parameters of the link, as the manifests declare them.
const (
	ParamProfile = "profile"   // linkemu profile name, or custom
	ParamUp      = "up"        // bit/s, -1 keeps the profile's
	ParamDown    = "down"      // bit/s, -1 keeps the profile's
	ParamRTT     = "rtt_ms"    // ms, -1 keeps the profile's
	ParamJitter  = "jitter_ms" // ms, -1 keeps the profile's
	ParamLoss    = "loss_pct"  // % of TCP segments lost each way, -1 keeps the profile's
)

// StateNetworkConfigured is the sync state the sidecar signals once it
// has applied an instance's network.Config.
const StateNetworkConfigured = sync.State("network-configured")

// LoopbackHTTP keeps the SDK's pprof and metrics listener on loopback
// when the run has no sidecar (run.Invoke binds 0.0.0.0:6060 otherwise).
// Plans call it from init.
func LoopbackHTTP() {
	if v, _ := strconv.ParseBool(os.Getenv(runtime.EnvTestSidecar)); v {
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return
	}
	run.HTTPListenAddr = l.Addr().String()
	go serveLoopback(l)
}

// serveLoopback serves the default mux, which holds net/http/pprof's
// handlers, for the plan process's lifetime (a test of a plan ignores
// it: PlanGoroutine).
func serveLoopback(l net.Listener) { http.Serve(l, nil) }

// PlanGoroutine names the function of the goroutine LoopbackHTTP starts,
// which lives as long as the process, for goleak.IgnoreAnyFunction.
const PlanGoroutine = "github.com/p2pmsg/p2pmsg/testplans/internal/plan.serveLoopback"

// Shapes returns the egress shapes of the two ends of link: the sender
// sends through Up, the receiver through Down. network.LinkShape's
// Bandwidth is egress bytes per second, as linkemu's is.
func Shapes(l linkemu.Link) (sender, receiver network.LinkShape) {
	return linkShape(l.Up), linkShape(l.Down)
}

func linkShape(s linkemu.Shape) network.LinkShape {
	return network.LinkShape{Latency: s.Latency, Jitter: s.Jitter, Bandwidth: uint64(s.Bandwidth), Loss: float32(100 * s.Loss)}
}

// ErrUnsupportedShape reports a LinkShape the in-process emulation cannot
// reproduce (corruption, reordering, duplication, loss beyond
// linkemu.MaxLoss). Loss itself is emulated as the delay a TCP stream
// pays to repair it (pkg/linkemu), where the sidecar drops packets.
var ErrUnsupportedShape = errors.New("plan: link shape not emulated in process")

// Emulated returns the linkemu link that applies, at one end, what the
// sidecar applies to both: own is this end's egress shape, peer the other
// end's (what this end receives).
func Emulated(own, peer network.LinkShape) (linkemu.Link, error) {
	up, err := emulated(own)
	if err != nil {
		return linkemu.Link{}, err
	}
	down, err := emulated(peer)
	if err != nil {
		return linkemu.Link{}, err
	}
	return linkemu.Link{Up: up, Down: down}, nil
}

func emulated(s network.LinkShape) (linkemu.Shape, error) {
	loss := float64(s.Loss) / 100
	if s.Corrupt != 0 || s.Reorder != 0 || s.Duplicate != 0 || s.Filter != network.Accept || !(loss >= 0 && loss <= linkemu.MaxLoss) {
		return linkemu.Shape{}, fmt.Errorf("%w: %+v", ErrUnsupportedShape, s)
	}
	return linkemu.Shape{Bandwidth: int64(s.Bandwidth), Latency: s.Latency, Jitter: s.Jitter, Loss: loss}, nil
}

// Shape applies this instance's egress shape own. With a sidecar it asks
// for it through network.Config and waits until every instance's shaping
// is applied, and returns the zero link (nothing left to emulate). Without
// one, it returns the link to emulate in process: own out, peer in, for
// the one instance (emulate true) whose connections carry both; the
// other gets the zero link, so nothing is shaped twice.
func Shape(ctx context.Context, re *runtime.RunEnv, nc *network.Client, own, peer network.LinkShape, emulate bool) (linkemu.Link, error) {
	if re.TestSidecar {
		err := nc.ConfigureNetwork(ctx, &network.Config{
			Network:        network.DefaultDataNetwork,
			Enable:         true,
			Default:        own,
			CallbackState:  StateNetworkConfigured,
			CallbackTarget: re.TestInstanceCount,
			RoutingPolicy:  network.DenyAll,
		})
		return linkemu.Link{}, err
	}
	if !emulate {
		return linkemu.Link{}, nil
	}
	return Emulated(own, peer)
}

// ListenAddr is the TCP multiaddr a node listens on: the data network's
// address with a sidecar, loopback without.
func ListenAddr(nc *network.Client) (string, error) {
	ip, err := nc.GetDataNetworkIP()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("/ip4/%s/tcp/0", ip), nil
}

// WriteOutput writes a file into the instance's outputs directory.
func WriteOutput(re *runtime.RunEnv, name string, data []byte) error {
	if re.TestOutputsPath == "" {
		return errors.New("plan: the run gave no outputs directory")
	}
	return os.WriteFile(filepath.Join(re.TestOutputsPath, name), data, 0o644)
}
