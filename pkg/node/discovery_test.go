package node_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// loopbackMulticast says whether a loopback interface that is up carries
// multicast, and describes the loopback interfaces seen.
func loopbackMulticast() (bool, string) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return false, err.Error()
	}
	var seen []string
	for _, ifi := range ifaces {
		if ifi.Flags&net.FlagLoopback == 0 {
			continue
		}
		seen = append(seen, ifi.Name+" <"+ifi.Flags.String()+">")
		if ifi.Flags&net.FlagUp != 0 && ifi.Flags&net.FlagMulticast != 0 {
			return true, ""
		}
	}
	return false, strings.Join(seen, ", ")
}

// TestMDNSDiscovery: two nodes with WithMDNS find and connect to each other
// on their own. go-libp2p's mDNS (through zeroconf) sends and listens only
// on interfaces flagged multicast, and p2pmsg's tests keep to loopback, so
// the test needs a loopback interface with multicast: without one it runs
// in a network namespace of its own (runInNetns). Note that on a machine
// whose loopback carries multicast, mDNS also announces on the machine's
// other multicast interfaces.
func TestMDNSDiscovery(t *testing.T) {
	if ok, _ := loopbackMulticast(); !ok && !runInNetns(t) {
		return
	}
	a := testutil.NewNode(t, node.WithMDNS())
	b := testutil.NewNode(t, node.WithMDNS())
	deadline := time.Now().Add(30 * time.Second)
	for a.Host().Network().Connectedness(b.ID()) != network.Connected {
		if time.Now().After(deadline) {
			t.Fatal("the nodes did not find each other over mDNS within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestWithSecurity(t *testing.T) {
	tls := testutil.NewNode(t, node.WithSecurity(node.SecurityTLS))
	noise := testutil.NewNode(t, node.WithSecurity(node.SecurityNoise))
	both := testutil.NewNode(t) // DefaultSecurity
	for _, tt := range []struct {
		name         string
		from, to     *node.Node
		wantSecurity string
	}{
		{"default to TLS-only", both, tls, "/tls/1.0.0"},
		{"default to Noise-only", both, noise, "/noise"},
		{"Noise-only to default", noise, both, "/noise"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.from.Connect(context.Background(), tt.to.AddrInfo()); err != nil {
				t.Fatal(err)
			}
			c := tt.from.Host().Network().ConnsToPeer(tt.to.ID())
			if len(c) != 1 || string(c[0].ConnState().Security) != tt.wantSecurity {
				t.Fatalf("connections %v, want one secured by %s", c, tt.wantSecurity)
			}
		})
	}
	if err := tls.Connect(context.Background(), noise.AddrInfo()); err == nil {
		t.Fatal("a TLS-only node connected to a Noise-only one")
	}
	for _, bad := range [][]string{nil, {"ssl"}, {node.SecurityTLS, node.SecurityTLS}} {
		if _, err := node.New(context.Background(), node.WithSecurity(bad...)); !errors.Is(err, node.ErrBadOption) {
			t.Errorf("WithSecurity(%q) accepted: %v", bad, err)
		}
	}
}
