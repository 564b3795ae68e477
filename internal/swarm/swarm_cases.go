package swarm

import (
	"context"
	"fmt"
	"math"
	"runtime/debug"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// Bounds of a swarm run's waits. They are generous on purpose: a case
// that needs them has failed its targets by far, and says so in its
// figures rather than by an error.
const (
	swarmMeshWait  = 60 * time.Second // every member hears every publisher's probe
	swarmDrainWait = 10 * time.Second // after the last send, for deliveries still on their way
	swarmSendWait  = 10 * time.Second // one resolution, Send or Flush
	// Settle is how long an idle swarm settles before it is
	// measured (Config.Settle's default): what an idle peer costs is
	// what it keeps once the connections and streams the swarm's build
	// opened have been trimmed or have timed out. Its connection manager
	// trims those ConnGrace old, looking every connMgrPeriod, and the DHT
	// closes an inbound stream after dhtStreamIdle without a query.
	Settle = max(node.ConnGrace+connMgrPeriod, dhtStreamIdle) + 2*time.Second
	// dhtStreamIdle is how long go-libp2p-kad-dht keeps an idle inbound
	// stream, with a goroutine reading it.
	dhtStreamIdle = time.Minute
	// connMgrPeriod is how often go-libp2p's connection manager checks
	// whether to trim (its silence period).
	connMgrPeriod = 10 * time.Second
	// churnInterval spaces a churn sender's messages: it is the
	// granularity of the re-resolution times measured, and keeps the
	// probing unicast traffic (Targets flushed messages per stable peer)
	// small beside the propagate run it accompanies.
	churnInterval = 250 * time.Millisecond
	// churnResolveWait is how long the churn case's senders go on after
	// the publishers finish (the last departure falls at 80% of their
	// run): time for the last replacements' bindings to be found. A
	// sender that never reaches a replacement counts as a failure, so it
	// gets what one resolution may take: the pipe service's default
	// resolve timeout (10 s).
	churnResolveWait = 10 * time.Second
)

func swarmMessage(payload []byte) *message.Message {
	return message.New(message.Element{Name: "lab-swarm", Data: payload})
}

func runSwarmIdle(ctx context.Context, cfg Config) (Result, error) {
	debug.FreeOSMemory() // what earlier swarms left is not this one's
	s := newSwarm(cfg)
	defer s.close()
	var r Result
	if err := s.build(ctx, cfg.Peers); err != nil {
		return r, err
	}
	if err := sleepCtx(ctx, cfg.Settle); err != nil {
		return r, err
	}
	s.cost(&r)
	return r, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// propagateRun is a propagate pipe with every peer of a swarm a member.
type propagateRun struct {
	s    *swarm
	a    *adv.PipeAdvertisement
	pubs []*swarmPeer
	outs []*pipe.OutputPipe
}

// member makes p a member, delivering to the recorder.
func (pr *propagateRun) member(p *swarmPeer) error {
	_, err := p.ps.NewInputPipe(pr.a, pr.s.handler(p.idx))
	return err
}

// publish sends cfg.Rate messages a second, spread over the publishers,
// for cfg.Duration, and returns the messages published and counts the
// failures in t.
func (pr *propagateRun) publish(ctx context.Context, t *peerTally) []swarmMsg {
	cfg := pr.s.cfg
	per := max(1, int(math.Round(cfg.Rate*cfg.Duration.Seconds()/float64(len(pr.pubs)))))
	interval := time.Duration(float64(time.Second) * float64(len(pr.pubs)) / cfg.Rate)
	var (
		mu   sync.Mutex
		sent []swarmMsg
		wg   sync.WaitGroup
	)
	for i, out := range pr.outs {
		from := pr.pubs[i].idx
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Stagger the publishers across one interval.
			if sleepCtx(ctx, interval*time.Duration(i)/time.Duration(len(pr.outs))) != nil {
				return
			}
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for seq := range per {
				err := out.Send(ctx, swarmMessage(swarmPayload(cfg.Size, from, seq, kindData)))
				mu.Lock()
				if err != nil {
					t.fail(fmt.Sprintf("propagate: peer %d's message %d: %v", from+1, seq, err))
				} else {
					sent = append(sent, swarmMsg{kind: kindData, from: from, seq: seq})
				}
				mu.Unlock()
				select {
				case <-tick.C:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	wg.Wait()
	return sent
}

// drain waits until every receiver has every message, or swarmDrainWait.
func (s *swarm) drain(ctx context.Context, want map[int][]swarmMsg) {
	wctx, cancel := context.WithTimeout(ctx, swarmDrainWait)
	defer cancel()
	waitFor(wctx, func() bool {
		for to, msgs := range want {
			for _, m := range msgs {
				if !s.rec.has(to, m) {
					return false
				}
			}
		}
		return true
	})
}

// bindUnicast binds a unicast input pipe on p: a, or a new one if a is
// nil. It returns the pipe's advertisement.
func (s *swarm) bindUnicast(p *swarmPeer, a *adv.PipeAdvertisement) (*adv.PipeAdvertisement, error) {
	if a == nil {
		var err error
		if a, err = adv.New(adv.Unicast, fmt.Sprintf("lab-swarm-%d", p.idx), ""); err != nil {
			return nil, err
		}
	}
	if _, err := p.ps.NewInputPipe(a, s.handler(p.idx)); err != nil {
		return nil, err
	}
	return a, nil
}

// waitProvider waits until asker finds a provider record for the pipe of
// a in the DHT: bindings publish theirs in the background.
func waitProvider(ctx context.Context, asker *swarmPeer, a *adv.PipeAdvertisement) error {
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err := waitFor(wctx, func() bool {
		qctx, qcancel := context.WithTimeout(wctx, 2*time.Second)
		defer qcancel()
		for range asker.n.Routing().FindProvidersAsync(qctx, pipe.ProviderKey(a.ID), 1) {
			return true
		}
		return false
	})
	if err != nil {
		return fmt.Errorf("pipe %v has no provider record in the DHT after a minute: %w", a.ID, err)
	}
	return nil
}

// sendOne opens an output pipe to a (resolving it as opts say), sends one
// message from peer from and flushes it. It returns the time resolution
// took.
func sendOne(ctx context.Context, p *swarmPeer, a *adv.PipeAdvertisement, size, seq int, opts ...pipe.ResolveOption) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, swarmSendWait)
	defer cancel()
	t := time.Now()
	out, err := p.ps.NewOutputPipe(ctx, a, opts...)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	took := time.Since(t)
	if err := out.Send(ctx, swarmMessage(swarmPayload(size, p.idx, seq, kindUnicast))); err != nil {
		return took, err
	}
	return took, out.Flush(ctx)
}

// pairLog accounts for one sender's messages to one unicast pipe under
// churn.
type pairLog struct {
	From     int   `json:"from"`
	Pipe     int   `json:"pipe"`     // the pipe's slot
	Accepted []int `json:"accepted"` // Sends that returned nil
	Reported []int `json:"reported"` // accepted, then reported by Flush
	Rejected int   `json:"rejected"` // Sends that failed
}

// churnSender sends one message every churnInterval to a until stop
// closes, flushing each, and accounts for it in l.
func churnSender(ctx context.Context, stop <-chan struct{}, p *swarmPeer, a *adv.PipeAdvertisement, size int, l *pairLog) {
	var out *pipe.OutputPipe
	defer func() {
		if out != nil {
			out.Close()
		}
	}()
	t := time.NewTicker(churnInterval)
	defer t.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, swarmSendWait)
		if out == nil {
			var err error
			if out, err = p.ps.NewOutputPipe(sctx, a); err != nil {
				out = nil
				l.Rejected++
				cancel()
				continue
			}
		}
		if err := out.Send(sctx, swarmMessage(swarmPayload(size, p.idx, seq, kindUnicast))); err != nil {
			l.Rejected++
			cancel()
			continue
		}
		l.Accepted = append(l.Accepted, seq)
		if err := out.Flush(sctx); err != nil {
			// Flush covers this message only: the one before was
			// flushed already.
			l.Reported = append(l.Reported, seq)
		}
		cancel()
	}
}

// noHolePunching turns off what node.New turns on: DCUtR.
func noHolePunching(c *libp2p.Config) error {
	c.EnableHolePunching = false
	return nil
}
