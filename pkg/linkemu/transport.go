package linkemu

import (
	"context"
	"fmt"
	"net"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/transport"
	ma "github.com/multiformats/go-multiaddr"
	mafmt "github.com/multiformats/go-multiaddr-fmt"
	manet "github.com/multiformats/go-multiaddr/net"
)

// TCPTransport is a libp2p TCP transport whose raw connections cross an
// emulated link before libp2p's security and muxer see them, so every
// stream of the node pays the link's bandwidth and latency. Connections the
// node dials and accepts alike are shaped as seen from this node: Up for
// what it sends, Down for what it receives.
type TCPTransport struct {
	link     Link
	opts     []Option
	upgrader transport.Upgrader
	rcmgr    network.ResourceManager
}

var _ transport.Transport = (*TCPTransport)(nil)

// NewTCPTransport returns a constructor for libp2p.Transport:
//
//	libp2p.New(libp2p.NoTransports, libp2p.Transport(linkemu.NewTCPTransport(link)), ...)
func NewTCPTransport(l Link, opts ...Option) func(transport.Upgrader, network.ResourceManager) (*TCPTransport, error) {
	return func(u transport.Upgrader, rcmgr network.ResourceManager) (*TCPTransport, error) {
		if err := l.Validate(); err != nil {
			return nil, err
		}
		if rcmgr == nil {
			rcmgr = &network.NullResourceManager{}
		}
		return &TCPTransport{link: l, opts: opts, upgrader: u, rcmgr: rcmgr}, nil
	}
}

// Dial implements transport.Transport.
func (t *TCPTransport) Dial(ctx context.Context, raddr ma.Multiaddr, p peer.ID) (transport.CapableConn, error) {
	scope, err := t.rcmgr.OpenConnection(network.DirOutbound, true, raddr)
	if err != nil {
		return nil, err
	}
	if err := scope.SetPeer(p); err != nil {
		scope.Done()
		return nil, err
	}
	var d manet.Dialer
	c, err := d.DialContext(ctx, raddr)
	if err != nil {
		scope.Done()
		return nil, err
	}
	sc, err := t.shape(c)
	if err != nil {
		c.Close()
		scope.Done()
		return nil, err
	}
	cc, err := t.upgrader.Upgrade(ctx, t, sc, network.DirOutbound, p, scope)
	if err != nil {
		scope.Done()
		return nil, err
	}
	return cc, nil
}

func (t *TCPTransport) shape(c manet.Conn) (manet.Conn, error) {
	if tc, ok := c.(interface{ SetNoDelay(bool) error }); ok {
		tc.SetNoDelay(true)
	}
	sc, err := Conn(c, t.link, t.opts...)
	if err != nil {
		return nil, err
	}
	return &maConn{Conn: sc, laddr: c.LocalMultiaddr(), raddr: c.RemoteMultiaddr()}, nil
}

// CanDial implements transport.Transport.
func (t *TCPTransport) CanDial(addr ma.Multiaddr) bool { return mafmt.TCP.Matches(addr) }

// Listen implements transport.Transport.
func (t *TCPTransport) Listen(laddr ma.Multiaddr) (transport.Listener, error) {
	l, err := manet.Listen(laddr)
	if err != nil {
		return nil, err
	}
	return t.upgrader.UpgradeGatedMaListener(t, t.upgrader.GateMaListener(&shapedListener{Listener: l, t: t})), nil
}

// Protocols implements transport.Transport.
func (t *TCPTransport) Protocols() []int { return []int{ma.P_TCP} }

// Proxy implements transport.Transport.
func (t *TCPTransport) Proxy() bool { return false }

func (t *TCPTransport) String() string { return fmt.Sprintf("linkemu-tcp(%+v)", t.link) }

type shapedListener struct {
	manet.Listener
	t *TCPTransport
}

func (l *shapedListener) Accept() (manet.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc, err := l.t.shape(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	return sc, nil
}

type maConn struct {
	net.Conn
	laddr, raddr ma.Multiaddr
}

func (c *maConn) LocalMultiaddr() ma.Multiaddr  { return c.laddr }
func (c *maConn) RemoteMultiaddr() ma.Multiaddr { return c.raddr }
