package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	ma "github.com/multiformats/go-multiaddr"

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
	swarmSettle    = 2 * time.Second  // an idle swarm, before it is measured
	// churnInterval spaces a churn sender's messages: it is the
	// granularity of the re-resolution times measured, and keeps the
	// probing unicast traffic (Targets flushed messages per stable peer)
	// small beside the propagate run it accompanies.
	churnInterval = 250 * time.Millisecond
	// churnResolveWait is how long the churn case's senders go on after
	// the last replacement bound its pipe: the re-resolutions measured
	// at 50 peers take well under a second.
	churnResolveWait = 3 * time.Second
)

func swarmMessage(payload []byte) *message.Message {
	return message.New(message.Element{Name: "lab-swarm", Data: payload})
}

func runSwarmIdle(ctx context.Context, cfg SwarmConfig) (SwarmResult, error) {
	s := newSwarm(cfg)
	defer s.close()
	var r SwarmResult
	if err := s.build(ctx, cfg.Peers); err != nil {
		return r, err
	}
	if err := sleepCtx(ctx, swarmSettle); err != nil {
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

func newPropagateRun(s *swarm) (*propagateRun, error) {
	a, err := adv.New(adv.Propagate, "lab-swarm", "")
	if err != nil {
		return nil, err
	}
	return &propagateRun{s: s, a: a}, nil
}

// member makes p a member, delivering to the recorder.
func (pr *propagateRun) member(p *swarmPeer) error {
	_, err := p.ps.NewInputPipe(pr.a, pr.s.handler(p.idx))
	return err
}

// publishers opens the publishers' output pipes and waits until every
// peer in members has heard a probe from each of them: the mesh is up.
func (pr *propagateRun) publishers(ctx context.Context, pubs []*swarmPeer, members []*swarmPeer) error {
	pr.pubs = pubs
	var ids []int
	for _, p := range pubs {
		out, err := p.ps.NewOutputPipe(ctx, pr.a)
		if err != nil {
			return err
		}
		pr.outs = append(pr.outs, out)
		ids = append(ids, p.idx)
	}
	wctx, cancel := context.WithTimeout(ctx, swarmMeshWait)
	defer cancel()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		heard := 0
		for _, m := range members {
			if pr.s.rec.probed(m.idx, ids) {
				heard++
			}
		}
		if heard == len(members) {
			return nil
		}
		for i, out := range pr.outs {
			out.Send(wctx, swarmMessage(swarmPayload(swarmHeader, ids[i], 0, kindProbe)))
		}
		select {
		case <-ticker.C:
		case <-wctx.Done():
			return fmt.Errorf("propagate mesh: %d of %d members heard every publisher within %v", heard, len(members), swarmMeshWait)
		}
	}
}

// publish sends cfg.Rate messages a second, spread over the publishers,
// for cfg.Duration, and returns the messages published and the failures.
func (pr *propagateRun) publish(ctx context.Context) ([]swarmMsg, int) {
	cfg := pr.s.cfg
	per := max(1, int(math.Round(cfg.Rate*cfg.Duration.Seconds()/float64(len(pr.pubs)))))
	interval := time.Duration(float64(time.Second) * float64(len(pr.pubs)) / cfg.Rate)
	var (
		mu       sync.Mutex
		sent     []swarmMsg
		failures int
		wg       sync.WaitGroup
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
			t := time.NewTicker(interval)
			defer t.Stop()
			for seq := range per {
				err := out.Send(ctx, swarmMessage(swarmPayload(cfg.Size, from, seq, kindData)))
				mu.Lock()
				if err != nil {
					failures++
				} else {
					sent = append(sent, swarmMsg{kind: kindData, from: from, seq: seq})
				}
				mu.Unlock()
				select {
				case <-t.C:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	wg.Wait()
	return sent, failures
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

func runSwarmPropagate(ctx context.Context, cfg SwarmConfig) (SwarmResult, error) {
	var r SwarmResult
	s := newSwarm(cfg)
	defer s.close()
	if err := s.build(ctx, cfg.Peers); err != nil {
		return r, err
	}
	pr, err := newPropagateRun(s)
	if err != nil {
		return r, err
	}
	peers := s.alive()
	for _, p := range peers {
		if err := pr.member(p); err != nil {
			return r, err
		}
	}
	s.progress("swarm propagate: %d peers up, waiting for the mesh", len(peers))
	if err := pr.publishers(ctx, peers[:cfg.Publishers], peers); err != nil {
		return r, err
	}
	before := bytesOut(ctx, peers)
	sent, failures := pr.publish(ctx)
	want := map[int][]swarmMsg{}
	var receivers []int
	for _, p := range peers {
		want[p.idx] = sent
		receivers = append(receivers, p.idx)
	}
	s.drain(ctx, want)
	s.rec.tally(&r, receivers, kindData, sent)
	r.Failures = failures
	if r.Delivered > 0 {
		r.BytesPerDelivery = float64(bytesOut(ctx, peers)-before) / float64(r.Delivered)
	}
	s.cost(&r)
	return r, ctx.Err()
}

// unicastPipe is a unicast input pipe of a swarm: its advertisement, and
// the peers that bound it, one after the other (churn).
type unicastPipe struct {
	a       *adv.PipeAdvertisement
	binders []int
}

// bindUnicast binds a new unicast pipe on p.
func (s *swarm) bindUnicast(p *swarmPeer, up *unicastPipe) error {
	if up.a == nil {
		a, err := adv.New(adv.Unicast, fmt.Sprintf("lab-swarm-%d", p.idx), "")
		if err != nil {
			return err
		}
		up.a = a
	}
	if _, err := p.ps.NewInputPipe(up.a, s.handler(p.idx)); err != nil {
		return err
	}
	up.binders = append(up.binders, p.idx)
	return nil
}

// waitProviders waits until a peer other than the binder finds a
// provider record for each pipe in the DHT: bindings publish theirs in
// the background.
func (s *swarm) waitProviders(ctx context.Context, pipes map[int]*unicastPipe) error {
	peers := s.alive()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		missing int
	)
	sem := make(chan struct{}, 8)
	for idx, up := range pipes {
		asker := peers[(slices.IndexFunc(peers, func(p *swarmPeer) bool { return p.idx == idx })+1)%len(peers)]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := waitFor(wctx, func() bool {
				qctx, qcancel := context.WithTimeout(wctx, 2*time.Second)
				defer qcancel()
				for range asker.n.Routing().FindProvidersAsync(qctx, pipe.ProviderKey(up.a.ID), 1) {
					return true
				}
				return false
			})
			if err != nil {
				mu.Lock()
				missing++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if missing > 0 {
		return fmt.Errorf("%d of %d pipes have no provider record in the DHT after a minute", missing, len(pipes))
	}
	return nil
}

// pick returns k distinct indexes of n, none equal to not.
func (s *swarm) pick(n, k, not int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, i := range s.rng.Perm(n) {
		if i == not {
			continue
		}
		out = append(out, i)
		if len(out) == k {
			break
		}
	}
	return out
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

func runSwarmResolve(ctx context.Context, cfg SwarmConfig) (SwarmResult, error) {
	var r SwarmResult
	s := newSwarm(cfg)
	defer s.close()
	if err := s.build(ctx, cfg.Peers); err != nil {
		return r, err
	}
	peers := s.alive()
	pipes := map[int]*unicastPipe{}
	for _, p := range peers {
		up := &unicastPipe{}
		if err := s.bindUnicast(p, up); err != nil {
			return r, err
		}
		pipes[p.idx] = up
	}
	s.progress("swarm resolve: %d pipes bound, waiting for their provider records", len(pipes))
	if err := s.waitProviders(ctx, pipes); err != nil {
		return r, err
	}
	before := bytesOut(ctx, peers)
	var (
		mu       sync.Mutex
		resolves []time.Duration
		sends    sync.WaitGroup
	)
	want := map[int][]swarmMsg{}
	sem := make(chan struct{}, 16)
	for _, p := range peers {
		for _, t := range s.pick(len(peers), cfg.Targets, slices.Index(peers, p)) {
			target := peers[t]
			want[target.idx] = append(want[target.idx], swarmMsg{kind: kindUnicast, from: p.idx, seq: target.idx})
			sends.Add(1)
			sem <- struct{}{}
			go func() {
				defer sends.Done()
				defer func() { <-sem }()
				took, err := sendOne(ctx, p, pipes[target.idx].a, cfg.Size, target.idx)
				mu.Lock()
				defer mu.Unlock()
				if took > 0 {
					resolves = append(resolves, took)
				}
				if err != nil {
					r.Failures++
					s.progress("swarm resolve: peer %d to %d: %v", p.idx, target.idx, err)
				}
			}()
		}
	}
	sends.Wait()
	s.drain(ctx, want)
	tallyEach(&r, s.rec, want)
	slices.Sort(resolves)
	r.ResolveP50, r.ResolveP99 = int64(quantileD(resolves, 0.5)), int64(quantileD(resolves, 0.99))
	if r.Delivered > 0 {
		r.BytesPerDelivery = float64(bytesOut(ctx, peers)-before) / float64(r.Delivered)
	}
	s.cost(&r)
	return r, ctx.Err()
}

// tallyEach is tally for receivers that each expect their own messages.
func tallyEach(r *SwarmResult, rec *swarmRecorder, want map[int][]swarmMsg) {
	var lat []time.Duration
	for to, msgs := range want {
		var one SwarmResult
		rec.tally(&one, []int{to}, kindUnicast, msgs)
		r.Expected += one.Expected
		r.Delivered += one.Delivered
		r.Duplicates += one.Duplicates
		lat = append(lat, one.Latencies...)
	}
	r.Latencies = lat
	fillLatency(r)
}

func runSwarmRelay(ctx context.Context, cfg SwarmConfig) (SwarmResult, error) {
	var r SwarmResult
	s := newSwarm(cfg)
	defer s.close()
	private := max(1, int(math.Round(cfg.RelayFraction*float64(cfg.Peers))))
	public := cfg.Peers - private
	if public < cfg.Relays+1 {
		return r, fmt.Errorf("%d peers with %d private leave no public peer beside %d relays", cfg.Peers, private, cfg.Relays)
	}
	var relays []*swarmPeer
	for range cfg.Relays {
		p, err := s.join(ctx, node.WithRelayService(), node.WithLibp2pOptions(libp2p.ForceReachabilityPublic()))
		if err != nil {
			return r, err
		}
		relays = append(relays, p)
	}
	var senders []*swarmPeer
	for range public - cfg.Relays {
		p, err := s.join(ctx)
		if err != nil {
			return r, err
		}
		senders = append(senders, p)
	}
	// Private peers have no address, no DHT and no connection but to
	// their relay: every other peer reaches them through it. Hole
	// punching is off: on loopback it would always succeed, and the case
	// would measure direct connections after the first message.
	var privs []*swarmPeer
	var circuits []peer.AddrInfo
	for i := range private {
		rl := relays[i%len(relays)]
		p, err := s.joinVia(ctx, []peer.AddrInfo{rl.n.AddrInfo()}, false,
			node.WithListenAddrs(), node.WithLibp2pOptions(libp2p.NoListenAddrs, libp2p.ForceReachabilityPrivate(), noHolePunching))
		if err != nil {
			return r, err
		}
		rctx, rcancel := context.WithTimeout(ctx, swarmSendWait)
		_, err = client.Reserve(rctx, p.n.Host(), rl.n.AddrInfo())
		rcancel()
		if err != nil {
			return r, fmt.Errorf("reserving on relay %s: %w", rl.n.ID(), err)
		}
		circuit, err := ma.NewMultiaddr(rl.n.Addrs()[0].String() + "/p2p/" + rl.n.ID().String() + "/p2p-circuit")
		if err != nil {
			return r, err
		}
		privs = append(privs, p)
		circuits = append(circuits, peer.AddrInfo{ID: p.n.ID(), Addrs: []ma.Multiaddr{circuit}})
	}
	if err := s.refresh(ctx); err != nil {
		return r, err
	}
	pipes := make([]*unicastPipe, len(privs))
	for i, p := range privs {
		pipes[i] = &unicastPipe{}
		if err := s.bindUnicast(p, pipes[i]); err != nil {
			return r, err
		}
	}
	s.progress("swarm relay: %d relays, %d senders, %d private peers", len(relays), len(senders), len(privs))
	before := bytesOut(ctx, s.alive())
	var (
		mu    sync.Mutex
		sends sync.WaitGroup
	)
	want := map[int][]swarmMsg{}
	// Targets are dealt round-robin, so every private peer is reached by
	// the same number of senders (give or take one): relay v2 allows 16
	// circuits per peer by default, which (1-RelayFraction)/RelayFraction
	// times Targets must not exceed.
	k := min(cfg.Targets, len(privs))
	for j, p := range senders {
		for i := range k {
			t := (j*k + i) % len(privs)
			target := privs[t]
			want[target.idx] = append(want[target.idx], swarmMsg{kind: kindUnicast, from: p.idx, seq: target.idx})
			sends.Add(1)
			go func() {
				defer sends.Done()
				_, err := sendOne(ctx, p, pipes[t].a, cfg.Size, target.idx, pipe.ToPeers(circuits[t]))
				if err != nil {
					mu.Lock()
					r.Failures++
					mu.Unlock()
					s.progress("swarm relay: peer %d to %d: %v", p.idx, target.idx, err)
				}
			}()
		}
	}
	sends.Wait()
	s.drain(ctx, want)
	tallyEach(&r, s.rec, want)
	if r.Delivered > 0 {
		r.BytesPerDelivery = float64(bytesOut(ctx, s.alive())-before) / float64(r.Delivered)
	}
	perRelay := map[string]int{}
	for _, p := range privs {
		for _, c := range p.n.Host().Network().Conns() {
			if !c.Stat().Limited {
				continue
			}
			r.RelayCircuits++
			// /ip4/…/tcp/…/p2p/RELAY/p2p-circuit
			if rid, err := c.RemoteMultiaddr().ValueForProtocol(ma.P_P2P); err == nil {
				perRelay[rid]++
			}
		}
	}
	for _, n := range perRelay {
		r.RelayMaxCircuits = max(r.RelayMaxCircuits, n)
	}
	s.cost(&r)
	return r, ctx.Err()
}

// pairLog accounts for one sender's messages to one unicast pipe under
// churn.
type pairLog struct {
	From      int   `json:"from"`
	Pipe      int   `json:"pipe"`     // the pipe's slot
	Accepted  []int `json:"accepted"` // Sends that returned nil
	Lost      []int `json:"lost"`     // accepted, then reported by Flush
	Rejected  int   `json:"rejected"` // Sends that failed
	ReportedN int   `json:"reported"` // accepted messages a Flush reported
}

func runSwarmChurn(ctx context.Context, cfg SwarmConfig) (SwarmResult, error) {
	var r SwarmResult
	s := newSwarm(cfg)
	defer s.close()
	if err := s.build(ctx, cfg.Peers); err != nil {
		return r, err
	}
	peers := s.alive()
	pr, err := newPropagateRun(s)
	if err != nil {
		return r, err
	}
	slots := make([]*unicastPipe, len(peers)) // slot i: bound first by peers[i]
	for i, p := range peers {
		if err := pr.member(p); err != nil {
			return r, err
		}
		slots[i] = &unicastPipe{}
		if err := s.bindUnicast(p, slots[i]); err != nil {
			return r, err
		}
	}
	// Publishers stay; of the others, ChurnFraction of all peers leave.
	leaving := min(len(peers)-cfg.Publishers-1, max(1, int(math.Round(cfg.ChurnFraction*float64(len(peers))))))
	order := s.pick(len(peers)-cfg.Publishers, leaving, -1)
	churned := map[int]bool{} // slot
	for _, i := range order {
		churned[cfg.Publishers+i] = true
	}
	s.progress("swarm churn: %d peers up, waiting for the mesh and the DHT", len(peers))
	if err := pr.publishers(ctx, peers[:cfg.Publishers], peers); err != nil {
		return r, err
	}
	slotMap := map[int]*unicastPipe{}
	for i, up := range slots {
		slotMap[peers[i].idx] = up
	}
	if err := s.waitProviders(ctx, slotMap); err != nil {
		return r, err
	}
	// Every stable peer sends to Targets pipes, a message every
	// churnInterval, each flushed, so each is accounted for.
	var logs []*pairLog
	for i, p := range peers {
		if churned[i] {
			continue
		}
		for _, t := range s.pick(len(peers), cfg.Targets, i) {
			logs = append(logs, &pairLog{From: p.idx, Pipe: t})
		}
	}
	var (
		sendWG    sync.WaitGroup
		departMu  sync.Mutex
		departed  = map[int]time.Time{} // slot -> when its first binder left
		joinErr   error
		joinErrMu sync.Mutex
	)
	stop := make(chan struct{})
	for _, l := range logs {
		p := peers[slices.IndexFunc(peers, func(q *swarmPeer) bool { return q.idx == l.From })]
		sendWG.Add(1)
		go func() {
			defer sendWG.Done()
			churnSender(ctx, stop, p, slots[l.Pipe].a, cfg.Size, l)
		}()
	}
	// The departures, spread over the middle of the run, each followed
	// by a new peer that binds the departed peer's pipe.
	start := time.Now()
	replaced := make(chan struct{}) // closed once every departed peer is replaced
	go func() {
		defer close(replaced)
		for k, i := range order {
			slot := cfg.Publishers + i
			at := time.Duration(float64(cfg.Duration) * (0.2 + 0.6*float64(k)/float64(len(order))))
			select {
			case <-time.After(time.Until(start.Add(at))):
			case <-ctx.Done():
				return
			}
			gone := peers[slot]
			s.remove(gone)
			departMu.Lock()
			departed[slot] = time.Now()
			departMu.Unlock()
			gone.leave()
			p, err := s.join(ctx)
			if err == nil {
				err = pr.member(p)
			}
			if err == nil {
				err = s.bindUnicast(p, slots[slot])
			}
			if err != nil {
				joinErrMu.Lock()
				joinErr = errors.Join(joinErr, err)
				joinErrMu.Unlock()
			}
		}
	}()
	sent, failures := pr.publish(ctx)
	<-replaced
	// The senders go on long enough for the last replacement's binding
	// to be found.
	sleepCtx(ctx, churnResolveWait)
	close(stop)
	sendWG.Wait()
	if joinErr != nil {
		return r, joinErr
	}
	// Propagate: delivery to the peers alive throughout.
	want := map[int][]swarmMsg{}
	var stable []int
	for i, p := range peers {
		if !churned[i] {
			want[p.idx] = sent
			stable = append(stable, p.idx)
		}
	}
	s.drain(ctx, want)
	s.rec.tally(&r, stable, kindData, sent)
	r.Failures = failures
	// Unicast: every accepted message delivered or reported.
	var reresolve []time.Duration
	for _, l := range logs {
		r.Accepted += len(l.Accepted)
		r.Reported += l.Rejected + l.ReportedN
		for _, seq := range l.Accepted {
			if slices.Contains(l.Lost, seq) {
				continue
			}
			delivered := false
			for _, b := range slots[l.Pipe].binders {
				if s.rec.has(b, swarmMsg{kind: kindUnicast, from: l.From, seq: seq}) {
					delivered = true
					break
				}
			}
			if delivered {
				r.UnicastDelivered++
			} else {
				r.Lost++
				s.progress("swarm churn: message %d from peer %d to pipe %d was accepted and flushed without an error, and never delivered", seq, l.From, l.Pipe)
			}
		}
		if d, ok := departed[l.Pipe]; ok {
			binders := slots[l.Pipe].binders
			if len(binders) > 1 {
				if t, ok := s.rec.firstFrom(binders[len(binders)-1], l.From); ok {
					reresolve = append(reresolve, t.Sub(d))
				} else {
					r.Failures++ // never reached the new binder
				}
			}
		}
	}
	slices.Sort(reresolve)
	r.ResolveP50, r.ResolveP99 = int64(quantileD(reresolve, 0.5)), int64(quantileD(reresolve, 0.99))
	s.cost(&r)
	return r, ctx.Err()
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
			l.ReportedN++
			l.Lost = append(l.Lost, seq)
		}
		cancel()
	}
}

// noHolePunching turns off what node.New turns on: DCUtR.
func noHolePunching(c *libp2p.Config) error {
	c.EnableHolePunching = false
	return nil
}
