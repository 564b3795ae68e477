package pipe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// InputOption configures an input pipe.
type InputOption func(*inputConfig) error

type inputConfig struct {
	handler func(*Received)
}

// WithHandler delivers each message to f instead of Receive's queue. f
// runs on the connection's reader (for propagate pipes, on the pipe's
// own reader): while it runs, the sender waits, so return promptly or
// hand off. A panicking handler loses its message only. InputPipe.Close
// does not wait for a handler in progress; the Close of the service whose
// goroutine runs it does (this Service's for a propagate pipe, the
// endpoint service's otherwise), so a handler must not wait for anything
// the application does only after that Close.
func WithHandler(f func(*Received)) InputOption {
	return func(c *inputConfig) error {
		if f == nil {
			return fmt.Errorf("%w: nil handler", ErrBadOption)
		}
		c.handler = f
		return nil
	}
}

// InputPipe is a pipe bound on this peer: messages sent to it arrive
// here. It is safe for concurrent use.
type InputPipe struct {
	svc     *Service
	adv     *adv.PipeAdvertisement
	key     string
	box     *inbox // nil with a handler
	handler func(*Received)
	done    chan struct{}
	once    sync.Once
	release func() // undoes the binding

	dropped atomic.Uint64
	// lastTagged is the sender this pipe last had tagged (tagSender),
	// as of a generation of the service's senders: the peer of a
	// stream's messages seldom changes, so most messages need not look
	// it up in the service's table.
	lastTagged atomic.Pointer[taggedSender]
}

type taggedSender struct {
	peer peer.ID
	gen  uint64
}

// NewInputPipe binds the pipe a describes on this peer. A pipe can be
// bound once per peer (ErrBound); propagate pipes are the exception, as
// every binding subscribes. Messages are received with Receive, or handed
// to the WithHandler function.
func (s *Service) NewInputPipe(a *adv.PipeAdvertisement, opts ...InputOption) (*InputPipe, error) {
	if err := checkAdv(a); err != nil {
		return nil, err
	}
	if err := s.closedErr("binding " + a.ID.String()); err != nil {
		return nil, err
	}
	var c inputConfig
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	p := &InputPipe{svc: s, adv: a, key: Key(a.ID), handler: c.handler, done: make(chan struct{})}
	if p.handler == nil {
		p.box = newInbox(s.opts.queue, s.opts.queueBytes)
	}
	if a.Type == adv.Propagate {
		if err := s.subscribe(p); err != nil {
			return nil, err
		}
		return p, nil
	}
	// The pipe has its own endpoint listener, under its key: the
	// endpoint's first lookup finds it, so a message takes no second
	// lookup and no service lock. It is registered before the binding is
	// announced, so the first message sent after resolving finds it.
	if err := s.ep.Register(DataService, p.key, endpoint.ListenerFunc(p.deliverData)); err != nil {
		if errors.Is(err, endpoint.ErrExists) {
			return nil, fmt.Errorf("%w: input pipe %s", ErrBound, a.ID)
		}
		return nil, fmt.Errorf("pipe: binding %s: %w", a.ID, err)
	}
	release, err := bindLocal(s, s.inputs, p.key, RoleInput, p, a.ID, "input pipe")
	if err != nil {
		s.ep.Unregister(DataService, p.key)
		return nil, err
	}
	jxta := false
	if s.jxta != nil && a.Type == adv.Unicast {
		// JXTA peers send to PipeService/<pipe ID> (jxta.go).
		if err := s.ep.Register(JXTAPipeService, a.ID.String(), endpoint.ListenerFunc(p.deliverData)); err == nil {
			jxta = true
		}
	}
	p.release = func() {
		release()
		s.ep.Unregister(DataService, p.key)
		if jxta {
			s.ep.Unregister(JXTAPipeService, a.ID.String())
		}
	}
	return p, nil
}

// Adv returns the pipe's advertisement.
func (p *InputPipe) Adv() *adv.PipeAdvertisement { return p.adv }

// Receive returns the next message. After Close it still returns the
// messages already queued, then ErrClosed.
func (p *InputPipe) Receive(ctx context.Context) (*message.Message, error) {
	r, err := p.ReceiveFrom(ctx)
	if err != nil {
		return nil, err
	}
	m := r.Message
	r.recycle() // the caller has the message, and nothing else of r
	return m, nil
}

// ReceiveFrom is Receive with the message's provenance.
func (p *InputPipe) ReceiveFrom(ctx context.Context) (*Received, error) {
	if p.box == nil {
		return nil, ErrHandler
	}
	return p.box.get(ctx, p.done, func() error { return fmt.Errorf("%w: input pipe %s", ErrClosed, p.adv.ID) })
}

// Dropped counts messages refused because they did not arrive over an
// authenticated, encrypted connection (secure pipes; their sender is told,
// see OutputPipe.Flush), and propagate messages that could not be decoded
// or that gossipsub had handed over when the pipe closed.
func (p *InputPipe) Dropped() uint64 { return p.dropped.Load() }

// Close unbinds the pipe. Messages already queued can still be received;
// they no longer count against their senders' endpoint memory budgets.
func (p *InputPipe) Close() error {
	p.once.Do(func() {
		close(p.done)
		if p.box != nil {
			p.box.close()
		}
		if p.release != nil {
			p.release()
		}
	})
	return nil
}

// deliver queues r or runs the handler; it reports why it could not. d
// is the endpoint delivery r came in, if any.
func (p *InputPipe) deliver(ctx context.Context, r *Received, d *endpoint.Delivery) error {
	closed := func() error { return fmt.Errorf("%w: input pipe %s", ErrClosed, p.adv.ID) }
	select {
	case <-p.done:
		return closed()
	default:
	}
	if p.handler != nil {
		p.handler(r)
		return nil
	}
	ok, err := p.box.put(ctx, p.done, r, d)
	if ok {
		return nil
	}
	if err == nil {
		err = closed()
	}
	return err
}

// deliverData receives the unicast or secure pipe's messages from the
// endpoint. What it cannot deliver it refuses, so the sender learns of it.
func (p *InputPipe) deliverData(ctx context.Context, d *endpoint.Delivery) {
	if p.adv.Type == adv.UnicastSecure && d.Security == "" {
		p.dropped.Add(1)
		d.Release()
		d.Refuse("secure pipe: the connection is not encrypted")
		return
	}
	if t := p.lastTagged.Load(); t == nil || t.peer != d.Source || t.gen != p.svc.sendersGen.Load() {
		gen := p.svc.sendersGen.Load() // before tagging: a disconnection since has it tagged again
		p.svc.tagSender(d.Source)
		p.lastTagged.Store(&taggedSender{d.Source, gen})
	}
	r := received(d, p.adv.ID)
	if err := p.deliver(ctx, r, d); err != nil {
		r.recycle() // nobody saw it
		d.Refuse("pipe not bound here")
	}
}

// refuseData receives pipe messages for pipes not bound here, from a
// sender that has not yet learnt the pipe is gone, and refuses them: the
// sender's output pipe then resolves the binding again and reports what
// was refused (OutputPipe.Send, Flush).
func refuseData(_ context.Context, d *endpoint.Delivery) {
	d.Release()
	d.Refuse("pipe not bound here")
}

// topicRef is a joined propagate topic shared by the service's input and
// output pipes of one pipe ID.
type topicRef struct {
	topic  *pubsub.Topic
	refs   int
	inputs []*InputPipe
}

func (s *Service) joinTopic(a *adv.PipeAdvertisement) (*pubsub.Topic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	name := TopicPrefix + a.ID.String()
	t := s.topics[name]
	if t == nil {
		ps, err := s.pubsub()
		if err != nil {
			return nil, err
		}
		// The validator goes first, so no message of the topic escapes
		// it.
		// A topic's windows outlive its joining: re-binding a pipe must
		// not make its authors' old messages new again.
		sq := s.seqnoTables[name]
		if sq == nil {
			sq = &seqnos{}
			s.seqnoTables[name] = sq
		}
		if err := ps.RegisterTopicValidator(name, s.validateSeqno(sq), pubsub.WithValidatorInline(true)); err != nil {
			return nil, fmt.Errorf("pipe: validating %s: %w", name, err)
		}
		topic, err := ps.Join(name)
		if err != nil {
			ps.UnregisterTopicValidator(name)
			return nil, fmt.Errorf("pipe: joining %s: %w", name, err)
		}
		if s.ownPubSub {
			if err := topic.SetScoreParams(topicScoreParams()); err != nil {
				topic.Close()
				ps.UnregisterTopicValidator(name)
				return nil, fmt.Errorf("pipe: scoring %s: %w", name, err)
			}
		}
		t = &topicRef{topic: topic}
		s.topics[name] = t
	}
	t.refs++
	return t.topic, nil
}

func (s *Service) leaveTopic(a *adv.PipeAdvertisement, in *InputPipe) {
	name := TopicPrefix + a.ID.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topics[name]
	if t == nil {
		return
	}
	for i, p := range t.inputs {
		if p == in {
			t.inputs = append(t.inputs[:i], t.inputs[i+1:]...)
			break
		}
	}
	if t.refs--; t.refs == 0 {
		t.topic.Close()
		s.opts.ps.UnregisterTopicValidator(name)
		delete(s.topics, name)
	}
}

// subscribe binds a propagate input pipe: it subscribes to the pipe's
// topic and delivers what arrives there.
func (s *Service) subscribe(p *InputPipe) error {
	topic, err := s.joinTopic(p.adv)
	if err != nil {
		return err
	}
	// Gossipsub does not slow publishers down: a subscriber more than
	// its buffer behind loses messages (counted). The buffer stages
	// messages for the reader, which moves them into the queue at once or
	// drops them (counted) when the queue is full, so it holds messages
	// only while the reader is descheduled: on a loaded machine, a burst
	// of them. An unread pipe holds its queue.
	sub, err := topic.Subscribe(pubsub.WithBufferSize(max(32, 2*s.opts.queue)))
	if err != nil {
		s.leaveTopic(p.adv, nil)
		return fmt.Errorf("pipe: subscribing to %s: %w", topic.String(), err)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	// Everything release needs exists before p is published below: from
	// there Service.Close may close it.
	stop := s.provide(p.adv.ID)
	p.release = func() {
		cancel()
		sub.Cancel()
		stop()
		s.mu.Lock()
		s.unbind(p.key, RolePropagate)
		s.mu.Unlock()
		s.leaveTopic(p.adv, p)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		sub.Cancel()
		stop()
		s.leaveTopic(p.adv, nil)
		return ErrClosed
	}
	s.topics[TopicPrefix+p.adv.ID.String()].inputs = append(s.topics[TopicPrefix+p.adv.ID.String()].inputs, p)
	s.bind(p.key, RolePropagate)
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		for {
			msg, err := sub.Next(ctx)
			if err != nil {
				break
			}
			m, err := wire.Unmarshal(msg.Data, wire.WithMaxMessageSize(int64(max(len(msg.Data), 64))))
			if err != nil {
				p.dropped.Add(1)
				continue
			}
			from := msg.GetFrom()
			p.offer(ctx, &Received{Message: m, From: from, FromJXTA: s.jxtaID(from), Pipe: p.adv.ID})
		}
		// Closed: what gossipsub had handed over is counted, not lost in
		// silence. The cancelled subscription's channel closes once its
		// buffer is read; the bound is for a router already stopped.
		dctx, dcancel := context.WithTimeout(context.Background(), time.Second)
		defer dcancel()
		for {
			if _, err := sub.Next(dctx); err != nil {
				return
			}
			p.dropped.Add(1)
		}
	}()
	return nil
}

// offer delivers a propagate message from gossipsub without waiting for
// room: what the queue has no room for is dropped and counted
// (Stats.PropagateUndelivered), as gossipsub counts what its buffer has
// no room for; what arrives after Close is counted in Dropped.
func (p *InputPipe) offer(ctx context.Context, r *Received) {
	select {
	case <-p.done:
		p.dropped.Add(1)
		return
	default:
	}
	if p.handler != nil {
		p.safeDeliver(ctx, r) // a handler that panics is counted there
		return
	}
	if !p.box.tryPut(r) {
		p.svc.gossip.undelivered.Add(1)
	}
}

// safeDeliver is deliver for callers with no endpoint to recover a
// panicking handler: the pipe's own reader and local sends.
func (p *InputPipe) safeDeliver(ctx context.Context, r *Received) (err error) {
	defer func() {
		if v := recover(); v != nil {
			p.dropped.Add(1)
			err = fmt.Errorf("%w: handler of %s panicked: %v", ErrHandler, p.adv.ID, v)
		}
	}()
	return p.deliver(ctx, r, nil)
}
