package pipe

import (
	"net"
	"slices"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
)

// A node on loopback exempts its own address from the IP colocation
// penalty, so a swarm of nodes on one machine is not scored down for
// sharing it, and other loopback addresses are hosts like any other.
func TestOwnNetsExemptsListenAddress(t *testing.T) {
	n := testutil.NewNode(t)
	nets := ownNets(n.Host().Network())
	covers := func(ip string) bool {
		return slices.ContainsFunc(nets, func(c *net.IPNet) bool { return c.Contains(net.ParseIP(ip)) })
	}
	if !covers("127.0.0.1") {
		t.Fatalf("own listen address 127.0.0.1 not exempt: %v", nets)
	}
	if covers("127.0.0.2") {
		t.Fatalf("127.0.0.2, another host, exempt: %v", nets)
	}
}
