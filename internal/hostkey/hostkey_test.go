package hostkey_test

import (
	"net"
	"net/netip"
	"testing"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/p2pmsg/p2pmsg/internal/hostkey"
)

func TestHosts(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  func() (netip.Prefix, bool)
		want string // "" for no host
	}{
		{"IPv4 TCP", func() (netip.Prefix, bool) {
			return hostkey.FromNetAddr(&net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 9701})
		}, "192.0.2.7/32"},
		{"IPv4-mapped", func() (netip.Prefix, bool) { return hostkey.FromString("[::ffff:192.0.2.7]:9701") }, "192.0.2.7/32"},
		{"IPv6 /64", func() (netip.Prefix, bool) { return hostkey.FromString("[2001:db8:1:2:aaaa::1]:9701") }, "2001:db8:1:2::/64"},
		{"IPv6 zone", func() (netip.Prefix, bool) { return hostkey.FromString("[fe80::1%eth0]:9701") }, "fe80::/64"},
		{"UDP", func() (netip.Prefix, bool) {
			return hostkey.FromNetAddr(&net.UDPAddr{IP: net.ParseIP("2001:db8::9"), Port: 1})
		}, "2001:db8::/64"},
		{"no IP", func() (netip.Prefix, bool) { return hostkey.FromString("pipe") }, ""},
		{"nil", func() (netip.Prefix, bool) { return hostkey.FromNetAddr(nil) }, ""},
		{"multiaddr TCP", func() (netip.Prefix, bool) {
			return hostkey.FromMultiaddr(ma.StringCast("/ip4/127.0.0.2/tcp/4001"))
		}, "127.0.0.2/32"},
		{"multiaddr QUIC IPv6", func() (netip.Prefix, bool) {
			return hostkey.FromMultiaddr(ma.StringCast("/ip6/2001:db8:0:1::5/udp/4001/quic-v1"))
		}, "2001:db8:0:1::/64"},
		{"relayed: the relay's host", func() (netip.Prefix, bool) {
			return hostkey.FromMultiaddr(ma.StringCast("/ip4/198.51.100.1/tcp/4001/p2p/12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo/p2p-circuit"))
		}, "198.51.100.1/32"},
		{"multiaddr without IP", func() (netip.Prefix, bool) { return hostkey.FromMultiaddr(ma.StringCast("/dns4/example.com/tcp/1")) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := tc.got()
			if tc.want == "" {
				if ok {
					t.Fatalf("host %v, want none", p)
				}
				return
			}
			if !ok || p.String() != tc.want {
				t.Fatalf("host %v (%v), want %s", p, ok, tc.want)
			}
		})
	}
}
