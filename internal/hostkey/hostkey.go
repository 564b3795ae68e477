// Package hostkey names the remote host a connection is counted under by
// the bounds that share a resource out by host rather than by peer
// identity, which costs nothing to make: JXTA's TCP transport's
// connection slots and memory budget (pkg/jxtatcp), a socket listener's
// backlog (pkg/socket), a node's handshakes and DHT routing table
// (pkg/node). It sits below the transports and knows nothing of them.
//
// A host is an IPv4 address, or an IPv6 /64: a host is given a whole /64
// and picks addresses in it at will (RFC 4291's interface identifiers),
// so counting IPv6 addresses one by one would give it 2^64 shares.
package hostkey

import (
	"net"
	"net/netip"

	ma "github.com/multiformats/go-multiaddr"
)

// Of returns the host ip is counted under: ip/32 for IPv4 (an
// IPv4-mapped IPv6 address is IPv4), its /64 for IPv6, zone dropped.
func Of(ip netip.Addr) netip.Prefix {
	ip = ip.Unmap().WithZone("")
	bits := 64
	if ip.Is4() {
		bits = 32
	}
	p, _ := ip.Prefix(bits) // cannot fail: bits fits both families
	return p
}

// FromNetAddr returns the host of a TCP or UDP address, or of any
// address whose String is ip:port; false if a has no IP.
func FromNetAddr(a net.Addr) (netip.Prefix, bool) {
	switch a := a.(type) {
	case *net.TCPAddr:
		return fromAddrPort(a.AddrPort())
	case *net.UDPAddr:
		return fromAddrPort(a.AddrPort())
	case nil:
		return netip.Prefix{}, false
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Prefix{}, false
	}
	return fromAddrPort(ap)
}

// FromString returns the host of an ip:port address, as
// net.Conn.RemoteAddr().String() gives; false if s is not one.
func FromString(s string) (netip.Prefix, bool) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	return fromAddrPort(ap)
}

func fromAddrPort(ap netip.AddrPort) (netip.Prefix, bool) {
	if !ap.Addr().IsValid() {
		return netip.Prefix{}, false
	}
	return Of(ap.Addr()), true
}

// FromMultiaddr returns the host of a libp2p connection's remote
// multiaddr: that of its first IP component. For a relayed connection
// (…/p2p/relay/p2p-circuit) that is the relay's host, the one whose
// bytes arrive here; the peer behind the relay is not reachable at any
// address the connection shows. False if m has no IP component (a DNS
// name is never a connection's remote address).
func FromMultiaddr(m ma.Multiaddr) (netip.Prefix, bool) {
	for _, c := range m {
		switch c.Code() {
		case ma.P_IP4, ma.P_IP6:
			ip, ok := netip.AddrFromSlice(c.RawValue())
			if !ok {
				return netip.Prefix{}, false
			}
			return Of(ip), true
		}
	}
	return netip.Prefix{}, false
}
