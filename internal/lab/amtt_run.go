package lab

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// RunAMTT runs the AMTT experiment between two p2pmsg nodes in this
// process, on loopback TCP: the sender's node reaches the receiver's
// through cfg.Link, emulated in process (linkemu.NewTCPTransport), and the
// two talk over bidirectional pipes.
func RunAMTT(ctx context.Context, cfg AMTTConfig) ([]AMTTResult, error) {
	// RunAMTTSender normalizes cfg itself: normalized twice, a warm-up of
	// none (negative, 0 once normalized) would become the default.
	norm, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	comm, data, err := NewAMTTAdvs()
	if err != nil {
		return nil, err
	}
	rcv, err := NewAMTTPeer(ctx, linkemu.Link{}, 0, "")
	if err != nil {
		return nil, err
	}
	defer rcv.Close()
	snd, err := NewAMTTPeer(ctx, norm.Link, norm.Seed, "")
	if err != nil {
		return nil, err
	}
	defer snd.Close()
	if err := rcv.Listen(comm, data); err != nil {
		return nil, err
	}
	type accepted struct {
		p   AMTTPipes
		err error
	}
	acc := make(chan accepted, 1)
	actx, acancel := context.WithCancel(ctx)
	defer acancel()
	go func() {
		p, err := rcv.Accept(actx)
		acc <- accepted{p, err}
	}()
	sp, err := snd.Connect(ctx, comm, data, rcv.Node.AddrInfo())
	if err != nil {
		acancel()
	}
	a := <-acc
	if err == nil {
		err = a.err
	}
	if err != nil {
		return nil, fmt.Errorf("lab: amtt: connecting the pipes: %w", err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- ServeAMTTReceiver(rctx, a.p) }()
	res, err := RunAMTTSender(ctx, cfg, sp)
	if err != nil {
		cancel()
		<-served
		return nil, err
	}
	if err := <-served; err != nil {
		return nil, err
	}
	return res, nil
}

// NewAMTTAdvs returns advertisements for the experiment's two new pipes:
// the communication pipe and the pipe the encoding adapter is fitted on.
func NewAMTTAdvs() (comm, data *adv.PipeAdvertisement, err error) {
	if comm, err = adv.New(adv.Unicast, "amtt-comm", "AMTT communication pipe: handshake and control messages"); err != nil {
		return nil, nil, err
	}
	if data, err = adv.New(adv.Unicast, "amtt-data", "AMTT data pipe: the encoding adapter's"); err != nil {
		return nil, nil, err
	}
	return comm, data, nil
}

// AMTTPeer is one side of the experiment: a node with its endpoint and
// pipe services, and the pipes it connected or accepted.
type AMTTPeer struct {
	Node      *node.Node
	Endpoint  *endpoint.Service
	Pipes     *pipe.Service
	listeners []*pipe.Listener
	bidis     []*pipe.Bidi
	link      linkemu.Link
}

// wanDialTimeout bounds a dial from a node on a shaped link: libp2p's
// bound for wide-area addresses (and its listener's on a handshake),
// not the 5 s it gives local ones, since the link emulates a wide-area
// path though its addresses are loopback's.
const wanDialTimeout = 15 * time.Second

// setupBytes is about what setting up a libp2p connection carries each
// way (TLS, yamux, identify: 4.0–4.2 KB measured, Ed25519 keys), so a
// link whose slower direction carries less in wanDialTimeout may not
// connect at all.
const setupBytes = 4096

// NewAMTTPeer starts a node listening on listen (a TCP multiaddr; empty
// means loopback) whose connections cross link (the zero link shapes
// nothing; seed seeds its jitter), with endpoint and pipe services.
func NewAMTTPeer(ctx context.Context, link linkemu.Link, seed uint64, listen string) (*AMTTPeer, error) {
	if listen == "" {
		listen, _ = LoopbackAddr(TransportTCP)
	}
	opts := []node.Option{node.WithEphemeralKey(), node.WithListenAddrs(listen)}
	if !link.Up.IsZero() || !link.Down.IsZero() {
		opts = append(opts, node.WithLibp2pOptions(libp2p.NoTransports,
			libp2p.Transport(linkemu.NewTCPTransport(link, linkemu.WithSeed(seed))),
			libp2p.SwarmOpts(swarm.WithDialTimeoutLocal(wanDialTimeout))))
	}
	p := &AMTTPeer{link: link}
	var err error
	if p.Node, err = node.New(ctx, opts...); err != nil {
		return nil, err
	}
	if p.Endpoint, err = endpoint.New(p.Node); err == nil {
		p.Pipes, err = pipe.New(p.Endpoint, pipe.WithoutRouting())
	}
	if err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Listen binds the receiver's ends of both pipes.
func (p *AMTTPeer) Listen(comm, data *adv.PipeAdvertisement) error {
	for _, a := range []*adv.PipeAdvertisement{comm, data} {
		l, err := p.Pipes.Listen(a)
		if err != nil {
			return err
		}
		p.listeners = append(p.listeners, l)
	}
	return nil
}

// Accept waits for the sender to connect both pipes bound by Listen.
func (p *AMTTPeer) Accept(ctx context.Context) (AMTTPipes, error) {
	if len(p.listeners) != 2 {
		return AMTTPipes{}, errors.New("lab: amtt: Accept before Listen")
	}
	var b [2]*pipe.Bidi
	for i, l := range p.listeners {
		var err error
		if b[i], err = l.Accept(ctx); err != nil {
			return AMTTPipes{}, err
		}
		p.bidis = append(p.bidis, b[i])
	}
	return AMTTPipes{Comm: b[0], Data: b[1]}, nil
}

// Connect connects the sender to the receiver and opens both pipes to it.
// On a link too slow to set a connection up in wanDialTimeout, its error
// says so: the cause alone (a dial that failed, a pipe no peer was found
// to bind while identify still crossed the link) does not.
func (p *AMTTPeer) Connect(ctx context.Context, comm, data *adv.PipeAdvertisement, receiver peer.AddrInfo) (AMTTPipes, error) {
	pp, err := p.connect(ctx, comm, data, receiver)
	if r := p.slowerRate(); err != nil && ctx.Err() == nil && r > 0 && setupBytes*time.Second/time.Duration(r) > wanDialTimeout {
		return pp, fmt.Errorf("the link (%s) may be too slow to set up a libp2p connection, about %d KB each way, within %v: %w",
			DescribeLink(p.link), setupBytes/1000, wanDialTimeout, err)
	}
	return pp, err
}

func (p *AMTTPeer) connect(ctx context.Context, comm, data *adv.PipeAdvertisement, receiver peer.AddrInfo) (AMTTPipes, error) {
	if err := p.Node.Connect(ctx, receiver); err != nil {
		return AMTTPipes{}, err
	}
	var b [2]*pipe.Bidi
	for i, a := range []*adv.PipeAdvertisement{comm, data} {
		var err error
		if b[i], err = p.Pipes.Connect(ctx, a, pipe.ToPeers(receiver)); err != nil {
			return AMTTPipes{}, err
		}
		p.bidis = append(p.bidis, b[i])
	}
	return AMTTPipes{Comm: b[0], Data: b[1]}, nil
}

// slowerRate is the bandwidth of p's link in its slower direction, in
// bytes/s; 0 if neither is limited.
func (p *AMTTPeer) slowerRate() int64 {
	up, down := p.link.Up.Bandwidth, p.link.Down.Bandwidth
	if up == 0 || (down != 0 && down < up) {
		return down
	}
	return up
}

// Close closes the pipes, the services and the node.
func (p *AMTTPeer) Close() error {
	var errs []error
	for _, b := range p.bidis {
		errs = append(errs, b.Close())
	}
	for _, l := range p.listeners {
		errs = append(errs, l.Close())
	}
	if p.Pipes != nil {
		errs = append(errs, p.Pipes.Close())
	}
	if p.Endpoint != nil {
		errs = append(errs, p.Endpoint.Close())
	}
	if p.Node != nil {
		errs = append(errs, p.Node.Close())
	}
	return errors.Join(errs...)
}
