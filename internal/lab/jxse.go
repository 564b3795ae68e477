package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/jxse"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

// The JXTA layers repeat the paper's study with a live, unmodified JXSE
// 2.7 peer on the other side, on JXTA's own TCP transport, signed as
// JXSE signs by default: jxta-endpoint, jxta-pipe and jxta-socket from a
// p2pmsg node (endpoint.WithJXTA) to the JXSE peer's echoes, and
// jxse-endpoint, jxse-pipe and jxse-socket from a second JXSE peer to the
// same echoes, as the reference. The JXSE peers are Java processes
// (internal/jxse), which needs Java and Maven on the machine; the
// reference's round trips are timed inside the JVM (TimedBatcher).
//
// JXSE echoes text: a payload goes as a study:text element of as many
// "x" characters (its bytes as such for sockets).

// JXSE runs the live JXSE peers the JXTA layers share, started at the
// first layer that needs them. Close stops them.
type JXSE struct {
	mu         sync.Mutex
	dir        string
	echo, from *jxse.Peer
	err        error
	seq        atomic.Int64
}

// Close stops the JXSE peers.
func (j *JXSE) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, p := range []*jxse.Peer{j.echo, j.from} {
		if p != nil {
			p.Close()
		}
	}
	j.echo, j.from = nil, nil
	if j.dir != "" {
		os.RemoveAll(j.dir)
	}
	return nil
}

// peers returns the echoing peer and, with both, the reference's sender.
func (j *JXSE) peers(both bool) (echo, from *jxse.Peer, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return nil, nil, j.err
	}
	launch := func() (*jxse.Peer, error) {
		if j.dir == "" {
			if j.dir, err = os.MkdirTemp("", "p2pmsg-lab-jxse-"); err != nil {
				return nil, err
			}
		}
		home, err := os.MkdirTemp(j.dir, "peer-")
		if err != nil {
			return nil, err
		}
		return jxse.Launch(jxse.PeerOptions{}, home)
	}
	if j.echo == nil {
		if j.echo, err = launch(); err != nil {
			j.err = fmt.Errorf("starting a JXSE 2.7 peer (needs Java and Maven): %w", err)
			return nil, nil, j.err
		}
	}
	if both && j.from == nil {
		if j.from, err = launch(); err != nil {
			j.err = fmt.Errorf("starting a JXSE 2.7 peer (needs Java and Maven): %w", err)
			return nil, nil, j.err
		}
		for _, r := range [][2]*jxse.Peer{{j.from, j.echo}, {j.echo, j.from}} {
			if err := r[0].Command("route " + r[1].ID + " " + r[1].Addr()); err != nil {
				return nil, nil, err
			}
		}
	}
	return j.echo, j.from, nil
}

// pipeAdv is a fresh unicast pipe advertisement named for the study.
func (j *JXSE) pipeAdv(name string) (*adv.PipeAdvertisement, error) {
	pid, err := id.PipeIDFromSeed(id.NetPeerGroupID, []byte(fmt.Sprintf("p2pmsg-lab-%s-%d-%d", name, os.Getpid(), j.seq.Add(1))))
	if err != nil {
		return nil, err
	}
	return &adv.PipeAdvertisement{ID: pid, Type: adv.Unicast, Name: name}, nil
}

// JXTA layer kinds.
const (
	JXTAEndpoint = "endpoint"
	JXTAPipe     = "pipe"
	JXTASocket   = "socket"
)

// JXTALayer measures p2pmsg's round trips with a live JXSE 2.7 peer: Kind
// is JXTAEndpoint, JXTAPipe or JXTASocket; its name is "jxta-" + Kind.
type JXTALayer struct {
	Kind string
	JXSE *JXSE
}

// Name implements Layer.
func (l JXTALayer) Name() string { return "jxta-" + l.Kind }

// Transport is the one the layer runs on, whatever the study's: JXTA's TCP.
func (JXTALayer) Transport() string { return TransportJXTATCP }

// Open implements Layer; the transport is JXTA's TCP, whatever is asked.
func (l JXTALayer) Open(ctx context.Context, _ string) (Pair, error) {
	echo, _, err := l.JXSE.peers(false)
	if err != nil {
		return nil, err
	}
	ident, err := jxtatcp.NewIdentity()
	if err != nil {
		return nil, err
	}
	n, err := NewNode(ctx, TransportTCP)
	if err != nil {
		return nil, err
	}
	p := &jxtaPair{closers: []io.Closer{n}, got: make(chan int, 1)}
	fail := func(err error) (Pair, error) {
		p.Close()
		return nil, fmt.Errorf("%s: %w", l.Name(), err)
	}
	ep, err := endpoint.New(n, endpoint.WithJXTA(ident, "tcp://127.0.0.1:0"))
	if err != nil {
		return fail(err)
	}
	p.closers = append([]io.Closer{ep}, p.closers...)
	// JXSE routes its answers to the peer ID: tell it where that is.
	if err := echo.Command("route " + ident.ID().String() + " " + ep.JXTA().Addrs()[0]); err != nil {
		return fail(err)
	}
	switch l.Kind {
	case JXTAEndpoint:
		if err := ep.Register("StudySvc", "echo-reply", endpoint.ListenerFunc(func(_ context.Context, d *endpoint.Delivery) {
			e, _ := d.Message.Get("study", "text")
			p.got <- len(e.Data)
		})); err != nil {
			return fail(err)
		}
		to, err := endpoint.ParseAddress(echo.Addr() + "/StudySvc/echo")
		if err != nil {
			return fail(err)
		}
		p.send = func(ctx context.Context, m *message.Message) error { return ep.Send(ctx, to, m) }
	case JXTAPipe:
		ps, err := pipe.New(ep)
		if err != nil {
			return fail(err)
		}
		p.closers = append([]io.Closer{ps}, p.closers...)
		there, err := l.JXSE.pipeAdv("there")
		if err != nil {
			return fail(err)
		}
		back, err := l.JXSE.pipeAdv("back")
		if err != nil {
			return fail(err)
		}
		in, err := ps.NewInputPipe(back, pipe.WithHandler(func(r *pipe.Received) {
			e, _ := r.Message.Get("study", "text")
			p.got <- len(e.Data)
		}))
		if err != nil {
			return fail(err)
		}
		p.closers = append([]io.Closer{in}, p.closers...)
		if err := echo.Command("pipeecho " + there.ID.String() + " " + back.ID.String() + " " + ident.ID().String()); err != nil {
			return fail(err)
		}
		out, err := ps.NewOutputPipe(ctx, there, pipe.ToJXTAPeers(echo.Addr()))
		if err != nil {
			return fail(err)
		}
		p.closers = append([]io.Closer{out}, p.closers...)
		p.send = out.Send
	case JXTASocket:
		ps, err := pipe.New(ep)
		if err != nil {
			return fail(err)
		}
		p.closers = append([]io.Closer{ps}, p.closers...)
		ss, err := socket.New(ps)
		if err != nil {
			return fail(err)
		}
		p.closers = append([]io.Closer{ss}, p.closers...)
		a, err := l.JXSE.pipeAdv("socket")
		if err != nil {
			return fail(err)
		}
		if err := echo.Command("socklisten " + a.ID.String() + " echo"); err != nil {
			return fail(err)
		}
		if p.conn, err = ss.Dial(ctx, a, pipe.ToJXTAPeers(echo.Addr())); err != nil {
			return fail(err)
		}
		p.closers = append([]io.Closer{p.conn}, p.closers...)
	default:
		return fail(fmt.Errorf("%w: JXTA layer kind %q", ErrUnknownLayer, l.Kind))
	}
	return p, nil
}

type jxtaPair struct {
	send    func(context.Context, *message.Message) error
	conn    *socket.Conn
	got     chan int // sizes of the echoes
	buf     []byte
	closers []io.Closer
}

// RoundTrip implements Pair.
func (p *jxtaPair) RoundTrip(ctx context.Context, payload []byte) error {
	if p.conn != nil {
		if _, err := p.conn.Write(payload); err != nil {
			return err
		}
		if cap(p.buf) < len(payload) {
			p.buf = make([]byte, len(payload))
		}
		_, err := io.ReadFull(p.conn, p.buf[:len(payload)])
		return err
	}
	if err := p.send(ctx, message.New(message.Text("study", "text", strings.Repeat("x", len(payload))))); err != nil {
		return err
	}
	select {
	case n := <-p.got:
		if n != len(payload) {
			return fmt.Errorf("echo of %d bytes for %d", n, len(payload))
		}
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("no echo within 30 s")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WireBytes implements Pair: not measured for JXTA's transport (0).
func (p *jxtaPair) WireBytes(int) int { return 0 }

// Close implements Pair.
func (p *jxtaPair) Close() error {
	for _, c := range p.closers {
		c.Close()
	}
	return nil
}

// JXSEReferenceLayer measures JXSE 2.7 against itself, the reference for
// JXTALayer: a second JXSE peer's round trips to the same echoes, timed
// in its JVM. Its name is "jxse-" + Kind.
type JXSEReferenceLayer struct {
	Kind string
	JXSE *JXSE
}

// Name implements Layer.
func (l JXSEReferenceLayer) Name() string { return "jxse-" + l.Kind }

// Transport is the one the layer runs on, whatever the study's: JXTA's TCP.
func (JXSEReferenceLayer) Transport() string { return TransportJXTATCP }

// Open implements Layer.
func (l JXSEReferenceLayer) Open(context.Context, string) (Pair, error) {
	echo, from, err := l.JXSE.peers(true)
	if err != nil {
		return nil, err
	}
	var cmd string
	switch l.Kind {
	case JXTAEndpoint:
		cmd = "eprun " + echo.Addr() + "/StudySvc/echo"
	case JXTAPipe:
		there, err := l.JXSE.pipeAdv("ref-there")
		if err != nil {
			return nil, err
		}
		back, err := l.JXSE.pipeAdv("ref-back")
		if err != nil {
			return nil, err
		}
		if err := echo.Command("pipeecho " + there.ID.String() + " " + back.ID.String() + " " + from.ID); err != nil {
			return nil, err
		}
		cmd = "piperun " + there.ID.String() + " " + back.ID.String() + " " + echo.ID
	case JXTASocket:
		a, err := l.JXSE.pipeAdv("ref-socket")
		if err != nil {
			return nil, err
		}
		if err := echo.Command("socklisten " + a.ID.String() + " echo"); err != nil {
			return nil, err
		}
		cmd = "sockrun " + a.ID.String() + " " + echo.ID
	default:
		return nil, fmt.Errorf("%w: JXSE layer kind %q", ErrUnknownLayer, l.Kind)
	}
	return &jxseRefPair{from: from, cmd: cmd}, nil
}

type jxseRefPair struct {
	from *jxse.Peer
	cmd  string
}

// TimedRoundTrips implements TimedBatcher.
func (p *jxseRefPair) TimedRoundTrips(_ context.Context, payload []byte, n int) (time.Duration, error) {
	res, err := p.from.Query(fmt.Sprintf("%s %d %d", p.cmd, n, len(payload)))
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(res), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("JXSE answered %q", res)
	}
	return time.Duration(ns), nil
}

// RoundTrip implements Pair.
func (p *jxseRefPair) RoundTrip(ctx context.Context, payload []byte) error {
	_, err := p.TimedRoundTrips(ctx, payload, 1)
	return err
}

// WireBytes implements Pair: not measured (0).
func (p *jxseRefPair) WireBytes(int) int { return 0 }

// Close implements Pair; the peers live until JXSE.Close.
func (p *jxseRefPair) Close() error { return nil }
