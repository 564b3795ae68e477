package pipe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/jxtarel"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// JxtaBiDiPipe with JXSE 2.7 peers. The client binds an ephemeral pipe
// and sends an open request to the listener's pipe (namespace JXTABIP:
// reqPipe, its advertisement; remPeer, its peer advertisement; reliable;
// direct = false); the listener binds its own and answers on the
// client's (remPipe, remPeer, direct = false). In reliable mode, the
// default, each message travels serialised, with its own CBJX trailer
// when signing is on, as one block of JXTA's reliable layer (package
// jxtarel); in unreliable mode as a plain pipe message. Closing is a
// message holding JXTABIP:close = "close", sent as the next block (or
// plainly). Listen accepts both modes; Connect opens reliable ones.

// ErrHandshake reports a JXTA handshake message that lacks what it must
// carry, or carries it malformed.
var ErrHandshake = errors.New("pipe: malformed JXTA handshake")

const (
	bidiNS       = "JXTABIP"
	bidiReqPipe  = "reqPipe"
	bidiRemPipe  = "remPipe"
	bidiRemPeer  = "remPeer"
	bidiReliable = "reliable"
	bidiDirect   = "direct"
	bidiClose    = "close"
)

// jxtaBidi is the JXTA side of a Bidi.
type jxtaBidi struct {
	x   *JXTASession
	rel *jxtarel.Conn // nil in unreliable mode
	t   *jxtatcp.Transport

	pump sync.WaitGroup
	once sync.Once
	open string // the listener's key for the client's open, if accepted here
}

// JXTAHandshake is what a JXTA connection handshake (a JxtaBiDiPipe open
// request or response, a JxtaSocket connect request or response) tells:
// the sender's ephemeral pipe, its peer, and whether the connection is
// reliable.
type JXTAHandshake struct {
	Pipe     *adv.PipeAdvertisement
	Peer     id.ID
	Reliable bool
}

// ParseJXTAHandshake reads a handshake message's pipe element pipeName
// (reqPipe in requests, remPipe in responses) and remPeer, in namespace
// ns, and the reliability flag element flag ("true" when absent). Both
// elements are required, as JXSE requires them.
func ParseJXTAHandshake(m *message.Message, ns, pipeName, flag string) (JXTAHandshake, error) {
	var h JXTAHandshake
	pe, ok := m.Get(ns, pipeName)
	if !ok {
		return h, fmt.Errorf("%w: no %s:%s", ErrHandshake, ns, pipeName)
	}
	a, err := adv.Parse(pe.Data)
	if err != nil {
		return h, fmt.Errorf("%w: %s:%s: %w", ErrHandshake, ns, pipeName, err)
	}
	if a.Type != adv.Unicast {
		return h, fmt.Errorf("%w: %s:%s is a %s pipe", ErrHandshake, ns, pipeName, a.Type)
	}
	re, ok := m.Get(ns, bidiRemPeer)
	if !ok {
		return h, fmt.Errorf("%w: no %s:%s", ErrHandshake, ns, bidiRemPeer)
	}
	if h.Peer, err = ParseJXTAPeerAdv(re.Data); err != nil {
		return h, err
	}
	h.Pipe, h.Reliable = a, true
	if f, ok := m.Get(ns, flag); ok {
		h.Reliable = string(f.Data) != "false"
	}
	return h, nil
}

// JXTAHandshakeMessage builds a handshake in namespace ns naming x's pipe
// as element pipeName (reqPipe in a request, remPipe in a response) and
// this peer's advertisement as remPeer, after the flag elements given.
func (s *Service) JXTAHandshakeMessage(ns, pipeName string, x *JXTASession, flags ...message.Element) (*message.Message, error) {
	mine, err := x.Adv().Marshal()
	if err != nil {
		return nil, err
	}
	m := message.New(flags...)
	m.Add(message.Element{Namespace: ns, Name: pipeName, MIME: message.XMLUTF8, Data: mine},
		message.Element{Namespace: ns, Name: bidiRemPeer, MIME: message.XMLUTF8, Data: s.JXTAPeerAdv()})
	return m, nil
}

// newJXTABidi makes the Bidi of session x, whose remote is set.
func (s *Service) newJXTABidi(a *adv.PipeAdvertisement, x *JXTASession, reliable bool) (*Bidi, error) {
	remote, _ := x.Remote()
	b := &Bidi{svc: s, adv: a, rjxta: remote, box: newInbox(s.opts.queue, s.opts.queueBytes), done: make(chan struct{})}
	jb := &jxtaBidi{x: x, t: s.ep.JXTA()}
	if reliable {
		rel, err := jxtarel.New(x.Send, jxtarel.WithWindow(50, 4<<20)) // 50: JXSE's own BiDi window
		if err != nil {
			return nil, err
		}
		jb.rel = rel
	}
	b.jx = jb
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		jb.teardown()
		return nil, ErrClosed
	}
	s.jxtaBidis[b] = struct{}{}
	s.mu.Unlock()
	if reliable {
		jb.pump.Add(1)
		go b.pumpJXTA()
	}
	return b, nil
}

// handleJXTA takes a message on the session's pipe.
func (b *Bidi) handleJXTA(r *Received) {
	jb := b.jx
	if jb.rel != nil {
		if !jb.rel.Handle(r.Message) {
			if _, ok := r.Message.Get(bidiNS, bidiClose); ok {
				// A plain close, as an unreliable peer sends it: the
				// pump ends the Bidi once it has taken every block
				// before it, or fails it if one is missing
				// (jxtarel.ErrIncomplete).
				jb.rel.SetEOF(io.EOF)
			}
		}
		return
	}
	if _, ok := r.Message.Get(bidiNS, bidiClose); ok {
		b.end(io.EOF)
		return
	}
	r.Pipe = b.adv.ID
	ctx, d := r.listening, r.delivery
	r.listening = nil
	if ctx == nil {
		// Kept until the Bidi existed, its listener has returned: its
		// charge has ended, there is nothing to hold.
		ctx, d = b.svc.ctx, nil
	}
	if ok, _ := b.box.put(ctx, b.done, r, d); !ok && r.delivery != nil {
		r.delivery.Release()
	}
}

// pumpJXTA moves reliable blocks, in order, into the Bidi's queue; a
// block is acknowledged when taken here, so a full queue stops the
// sender.
//
// Once the Bidi ends it takes no more blocks (they stay unacknowledged),
// and one taken before that stays receivable: Receive looks again once
// the pump is gone (ReceiveFrom).
func (b *Bidi) pumpJXTA() {
	jb := b.jx
	defer jb.pump.Done()
	ctx, cancel := context.WithCancel(b.svc.ctx)
	defer cancel()
	go func() {
		select {
		case <-b.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		p, err := jb.rel.Receive(ctx)
		if err != nil {
			if ctx.Err() == nil {
				b.fail(err)
			}
			return
		}
		m, signer, err := jb.t.UnmarshalSigned(p)
		if err != nil || !signer.IsZero() && signer != b.rjxta {
			b.svc.jxtaRefused.Add(1) // JXSE drops such messages too
			continue
		}
		if _, ok := m.Get(bidiNS, bidiClose); ok {
			b.end(io.EOF)
			return
		}
		r := &Received{Message: m, FromJXTA: b.rjxta, Unverified: signer.IsZero(), Pipe: b.adv.ID}
		if ok, _ := b.box.put(b.svc.ctx, b.done, r, nil); !ok {
			if b.svc.ctx.Err() == nil {
				b.box.keep(r) // acknowledged to the peer: not to be lost
			}
			return
		}
	}
}

// sendJXTA sends m to the other end.
func (jb *jxtaBidi) send(ctx context.Context, m *message.Message) error {
	if jb.rel == nil {
		return jb.x.Send(ctx, m)
	}
	p, err := jb.t.MarshalSigned(m)
	if err != nil {
		return err
	}
	return jb.rel.Send(ctx, p)
}

// close tells the other end and waits, at most closeTimeout, until it has
// acknowledged everything.
func (jb *jxtaBidi) close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	err := jb.send(ctx, message.New(message.Text(bidiNS, bidiClose, "close")))
	if err == nil && jb.rel != nil {
		err = jb.rel.Drain(ctx)
	}
	return err
}

// closeJXTA closes a JXTA Bidi: tells the other end if it has not
// closed first, then stops the reliable layer and unbinds the pipe.
func (b *Bidi) closeJXTA() error {
	var err error
	if b.end(ErrClosed) {
		if err = b.jx.close(b.svc.ctx); err != nil {
			err = fmt.Errorf("pipe %s: closing: %w", b.adv.ID, err)
		}
	} else if b.jx.rel != nil {
		// Ended first (the other end closed, or the connection failed):
		// nothing more will be acknowledged, and what was not may not
		// have arrived.
		if n := b.jx.rel.Pending(); n > 0 {
			err = fmt.Errorf("pipe %s: closing: %w: %d messages, before the connection ended (%w)", b.adv.ID, jxtarel.ErrUnacknowledged, n, b.Err())
		}
	}
	b.jx.teardown()
	b.svc.mu.Lock()
	delete(b.svc.jxtaBidis, b)
	if b.jx.open != "" {
		delete(b.svc.jxtaOpens, b.jx.open)
	}
	b.svc.mu.Unlock()
	return err
}

// teardown stops the reliable layer and unbinds the session's pipe.
func (jb *jxtaBidi) teardown() {
	jb.once.Do(func() {
		if jb.rel != nil {
			jb.rel.Close()
		}
		jb.x.Close()
		jb.pump.Wait()
	})
}

// connectJXTA opens a reliable JxtaBiDiPipe to the listener of a on one
// of the JXTA peers at addrs.
func (s *Service) connectJXTA(ctx context.Context, a *adv.PipeAdvertisement, addrs []string) (*Bidi, error) {
	server, err := s.ResolveJXTA(ctx, a, addrs...)
	if err != nil {
		return nil, err
	}
	answers := make(chan *Received, 16) // the answer, and what follows it before b is set
	var b *Bidi
	var bmu sync.Mutex
	x, err := s.NewJXTASession(a.Name, func(r *Received) {
		bmu.Lock()
		bb := b
		bmu.Unlock()
		if bb != nil {
			bb.handleJXTA(r)
			return
		}
		r.listening = nil // handled after its listener returned
		select {
		case answers <- r:
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	x.SetRemote(server, id.ID{}) // only the server may answer
	req, err := s.JXTAHandshakeMessage(bidiNS, bidiReqPipe, x,
		message.Text(bidiNS, bidiReliable, "true"), message.Text(bidiNS, bidiDirect, "false"))
	if err != nil {
		x.Close()
		return nil, err
	}
	hctx, cancel := context.WithTimeout(ctx, s.opts.resolveTimeout)
	defer cancel()
	if err := s.SendJXTA(hctx, server, a.ID, req); err != nil {
		x.Close()
		return nil, fmt.Errorf("pipe %s: opening a JxtaBiDiPipe: %w", a.ID, err)
	}
	for {
		select {
		case r := <-answers:
			h, err := ParseJXTAHandshake(r.Message, bidiNS, bidiRemPipe, bidiReliable)
			if err != nil || h.Peer != server {
				s.jxtaRefused.Add(1)
				continue // JXSE ignores such answers too
			}
			x.SetRemote(server, h.Pipe.ID)
			nb, err := s.newJXTABidi(a, x, true)
			if err != nil {
				x.Close()
				return nil, err
			}
			bmu.Lock()
			b = nb
			bmu.Unlock()
			for drained := false; !drained; {
				select {
				case r := <-answers:
					nb.handleJXTA(r)
				default:
					drained = true
				}
			}
			return nb, nil
		case <-hctx.Done():
			x.Close()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("%w: JXTA peer %s did not answer the JxtaBiDiPipe open within %v", ErrRefused, server, s.opts.resolveTimeout)
		}
	}
}

// listenJXTABidi takes JXSE peers' open requests for listener l.
func (s *Service) listenJXTABidi(l *Listener) (func(), error) {
	return s.listenJXTA(l.adv, func(r *Received) {
		h, err := ParseJXTAHandshake(r.Message, bidiNS, bidiReqPipe, bidiReliable)
		if err != nil || !r.FromJXTA.IsZero() && h.Peer != r.FromJXTA {
			s.jxtaRefused.Add(1)
			return
		}
		// An open repeated for a client pipe that has its connection
		// (JXSE's client resolves the pipe twice) is not a second one.
		key := h.Peer.String() + " " + h.Pipe.ID.String()
		s.mu.Lock()
		dup := s.jxtaOpens[key]
		s.mu.Unlock()
		if dup {
			return
		}
		if !l.reserve() {
			s.jxtaRefused.Add(1) // backlog full: the JXSE client times out
			return
		}
		s.mu.Lock()
		if dup = s.jxtaOpens[key]; !dup {
			s.jxtaOpens[key] = true
		}
		s.mu.Unlock()
		if dup {
			l.unreserve()
			return
		}
		// Off the reader: binding a session and queueing for Accept.
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer l.unreserve()
			s.acceptJXTA(l, h)
		}()
	})
}

// acceptJXTA makes the Bidi of an open request and offers it to Accept,
// which sends the response.
func (s *Service) acceptJXTA(l *Listener, h JXTAHandshake) {
	var b *Bidi
	var bmu sync.Mutex
	early := make(chan *Received, 16)
	x, err := s.NewJXTASession(l.adv.Name, func(r *Received) {
		bmu.Lock()
		bb := b
		bmu.Unlock()
		if bb == nil {
			r.listening = nil // handled after its listener returned
			select {
			case early <- r:
			default:
			}
			return
		}
		bb.handleJXTA(r)
	})
	key := h.Peer.String() + " " + h.Pipe.ID.String()
	if err != nil {
		s.mu.Lock()
		delete(s.jxtaOpens, key)
		s.mu.Unlock()
		return
	}
	x.SetRemote(h.Peer, h.Pipe.ID)
	nb, err := s.newJXTABidi(l.adv, x, h.Reliable)
	if err != nil {
		x.Close()
		s.mu.Lock()
		delete(s.jxtaOpens, key)
		s.mu.Unlock()
		return
	}
	nb.jx.open = key
	bmu.Lock()
	b = nb
	bmu.Unlock()
	for drained := false; !drained; {
		select {
		case r := <-early:
			nb.handleJXTA(r)
		default:
			drained = true
		}
	}
	if !l.enqueue(nb) {
		s.jxtaRefused.Add(1)
		nb.Close()
	}
}

// answerJXTA sends the open response for b, from Accept.
func (b *Bidi) answerJXTA(ctx context.Context) error {
	resp, err := b.svc.JXTAHandshakeMessage(bidiNS, bidiRemPipe, b.jx.x, message.Text(bidiNS, bidiDirect, "false"))
	if err != nil {
		return err
	}
	return b.jx.x.Send(ctx, resp)
}

// jxtaCloseAll closes the service's JXTA bidirectional pipes.
func (s *Service) jxtaCloseAll() {
	s.mu.Lock()
	bs := mapKeys(s.jxtaBidis)
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, b := range bs {
		wg.Add(1)
		go func() { defer wg.Done(); b.Close() }()
	}
	wg.Wait()
}

func mapKeys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
