package node

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/libp2p/go-libp2p/x/rate"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// ErrConnRate is the refusal of a connection from (or to) an address
// that has opened its share of connections lately (see connRate).
var ErrConnRate = errors.New("node: connection rate limit exceeded for this address")

// connRate is go-libp2p's rate limit of new connections per remote
// address, as its resource manager applies it by default (rcmgr's
// newConnRateLimiter, go-libp2p v0.51): an IPv4 address or an IPv6 /56
// opens 16 at once (twice go-libp2p's 8 connections per address), then
// one every 5 s; an IPv6 /48 opens 80, then one every 2 s; loopback is
// not limited. The node applies it itself, once per connection
// (handshakeLimiter.OpenConnection), and the resource manager none: the
// resource manager charged each call, and a connection that displaces a
// handshake asks it twice, so that with one connection left an
// address's new connection displaced a handshake and was then refused
// all the same.
func connRate() *rate.Limiter {
	const perAddr = 2 * MaxHandshakesPerHost // go-libp2p's 2 × defaultMaxConcurrentConns
	return &rate.Limiter{
		NetworkPrefixLimits: []rate.PrefixLimit{
			{Prefix: netip.MustParsePrefix("127.0.0.0/8")},
			{Prefix: netip.MustParsePrefix("::1/128")},
		},
		SubnetRateLimiter: rate.SubnetLimiter{
			IPv4SubnetLimits: []rate.SubnetLimit{{PrefixLength: 32, Limit: rate.Limit{RPS: 0.2, Burst: perAddr}}},
			IPv6SubnetLimits: []rate.SubnetLimit{
				{PrefixLength: 56, Limit: rate.Limit{RPS: 0.2, Burst: perAddr}},
				{PrefixLength: 48, Limit: rate.Limit{RPS: 0.5, Burst: 5 * perAddr}},
			},
			GracePeriod: time.Minute,
		},
	}
}

// loopbackConnRate limits each loopback address to n connections, then
// one every 11.6 days (1e-6 per second: x/rate drops a bucket that never
// refills as soon as it is made), as connRate limits an IPv4 address to
// its burst before it refills (tests only: they spend an address's
// connections without timing anything).
func loopbackConnRate(n int) *rate.Limiter {
	return &rate.Limiter{SubnetRateLimiter: rate.SubnetLimiter{
		IPv4SubnetLimits: []rate.SubnetLimit{{PrefixLength: 32, Limit: rate.Limit{RPS: 1e-6, Burst: n}}}}}
}

// allowConn charges endpoint's address one connection, as go-libp2p's
// resource manager does (an endpoint without an IP address is charged
// to the zero address).
func allowConn(r *rate.Limiter, endpoint ma.Multiaddr) error {
	var addr netip.Addr
	if ip, err := manet.ToIP(endpoint); err == nil {
		addr, _ = netip.AddrFromSlice(ip)
	}
	if !r.Allow(addr.Unmap()) {
		return fmt.Errorf("%w: %v", ErrConnRate, endpoint)
	}
	return nil
}
