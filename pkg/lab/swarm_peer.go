package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// SwarmCoordinator is what one peer of a swarm spread over processes
// needs from its run: its number and rendezvous with the others.
// Testground's sync service provides it (testplans/swarm).
type SwarmCoordinator interface {
	// Seq is this peer's number, 1 to SwarmConfig.Peers.
	Seq() int
	// Share publishes b under name and returns every peer's, indexed by
	// Seq-1, once all have shared theirs.
	Share(ctx context.Context, name string, b []byte) ([][]byte, error)
	// Barrier returns once every peer has reached name.
	Barrier(ctx context.Context, name string) error
}

// peerTally is what each peer reports of a case.
type peerTally struct {
	Expected, Delivered, Duplicates, Failures int
	Latencies, Resolves                       []time.Duration
	RSS                                       int64
	Goroutines, Conns                         int
	BytesOut                                  int64
	Circuits                                  int // relay: relayed connections to this private peer
}

// SwarmPeerCases are the cases RunSwarmPeer runs.
var SwarmPeerCases = []string{SwarmPropagate, SwarmResolve, SwarmRelay}

// Roles of a peer in RunSwarmPeer's relay case; every peer is a sender
// in the others.
const (
	roleSender = iota
	roleRelay
	rolePrivate
)

// peerRole: in the relay case, the first Relays peers are relays and the
// last RelayFraction of them private.
func peerRole(cfg SwarmConfig, seq int) int {
	if cfg.Cases[0] != SwarmRelay {
		return roleSender
	}
	switch {
	case seq <= cfg.Relays:
		return roleRelay
	case seq > cfg.Peers-privateCount(cfg):
		return rolePrivate
	}
	return roleSender
}

// privateCount is how many peers the relay case makes private.
func privateCount(cfg SwarmConfig) int {
	return max(1, int(math.Round(cfg.RelayFraction*float64(cfg.Peers))))
}

// relayOf is the relay private peer seq reserves on, its k-th private
// peer on relay k modulo Relays.
func relayOf(cfg SwarmConfig, seq int) int {
	return 1 + (seq-(cfg.Peers-privateCount(cfg))-1)%cfg.Relays
}

// RunSwarmPeer runs this process's peer in one case (SwarmPeerCases) of a
// swarm whose other cfg.Peers-1 peers run the same function elsewhere,
// listening on listen (the relay case's private peers listen nowhere). The peer with Seq 1 returns
// the case's result, the others nil. Per-peer cost is each process's
// whole RSS, goroutines and connections, averaged over the peers.
func RunSwarmPeer(ctx context.Context, cfg SwarmConfig, c SwarmCoordinator, listen string) (*SwarmResult, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if len(cfg.Cases) != 1 || !slices.Contains(SwarmPeerCases, cfg.Cases[0]) {
		return nil, fmt.Errorf("%w: a peer runs one case of %v", ErrSwarmConfig, SwarmPeerCases)
	}
	seq := c.Seq()
	role := peerRole(cfg, seq)
	s := newSwarm(cfg)
	defer s.close()
	s.next = seq - 1 // peers are numbered as the run numbers them, from 0
	var p *swarmPeer
	var err error
	switch role {
	case roleRelay:
		p, err = s.joinVia(ctx, nil, true, node.WithListenAddrs(listen), node.WithRelayService(), node.WithLibp2pOptions(libp2p.ForceReachabilityPublic()))
	case rolePrivate:
		p, err = s.joinVia(ctx, nil, false, node.WithListenAddrs(), node.WithLibp2pOptions(libp2p.NoListenAddrs, libp2p.ForceReachabilityPrivate(), noHolePunching))
	default:
		p, err = s.joinVia(ctx, nil, true, node.WithListenAddrs(listen))
	}
	if err != nil {
		return nil, err
	}
	// Everyone's address; each connects to Degree random others.
	ai, _ := json.Marshal(p.n.AddrInfo())
	all, err := c.Share(ctx, "addr", ai)
	if err != nil {
		return nil, err
	}
	infos := make([]peer.AddrInfo, len(all))
	for i, b := range all {
		if err := json.Unmarshal(b, &infos[i]); err != nil {
			return nil, fmt.Errorf("peer %d's address: %w", i+1, err)
		}
	}
	if role == rolePrivate {
		// Only to its relay, where it reserves a slot.
		rl := infos[relayOf(cfg, seq)-1]
		cctx, cancel := context.WithTimeout(ctx, swarmSendWait)
		_, err := client.Reserve(cctx, p.n.Host(), rl)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("reserving on relay %s: %w", rl.ID, err)
		}
	} else {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(seq)))
		for _, i := range rng.Perm(len(infos)) {
			if i == seq-1 || len(infos[i].Addrs) == 0 || len(p.n.Host().Network().Peers()) >= cfg.Degree {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, swarmSendWait)
			p.n.Connect(cctx, infos[i]) // best effort: the DHT finds the rest
			cancel()
		}
	}
	if err := c.Barrier(ctx, "connected"); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	p.n.RefreshRouting(rctx)
	cancel()
	if err := c.Barrier(ctx, "routed"); err != nil {
		return nil, err
	}
	var t peerTally
	switch cfg.Cases[0] {
	case SwarmPropagate:
		err = propagatePeer(ctx, s, p, c, &t)
	case SwarmResolve:
		err = resolvePeer(ctx, s, p, c, &t)
	case SwarmRelay:
		err = relayPeer(ctx, s, p, c, infos, &t)
	}
	if err != nil {
		return nil, err
	}
	t.RSS, t.Goroutines, t.Conns = rssBytes(), runtime.NumGoroutine(), len(p.n.Host().Network().Conns())
	b, _ := json.Marshal(t)
	tallies, err := c.Share(ctx, "tally", b)
	if err != nil {
		return nil, err
	}
	// Nobody leaves before everyone has reported.
	if err := c.Barrier(ctx, "done"); err != nil {
		return nil, err
	}
	if seq != 1 {
		return nil, nil
	}
	r := &SwarmResult{Case: cfg.Cases[0], Peers: cfg.Peers, MinMemberShare: 1}
	var bytesOut int64
	perRelay := map[int]int{}
	for i, b := range tallies {
		var pt peerTally
		if err := json.Unmarshal(b, &pt); err != nil {
			return nil, fmt.Errorf("peer %d's tally: %w", i+1, err)
		}
		r.Expected += pt.Expected
		r.Delivered += pt.Delivered
		r.Duplicates += pt.Duplicates
		r.Failures += pt.Failures
		r.Latencies = append(r.Latencies, pt.Latencies...)
		t.Resolves = append(t.Resolves, pt.Resolves...)
		r.RSSPerPeer += pt.RSS / int64(len(tallies))
		r.GoroutinesPerPeer += float64(pt.Goroutines) / float64(len(tallies))
		r.ConnsPerPeer += float64(pt.Conns) / float64(len(tallies))
		bytesOut += pt.BytesOut
		r.RelayCircuits += pt.Circuits
		if pt.Circuits > 0 {
			perRelay[relayOf(cfg, i+1)] += pt.Circuits
		}
		if pt.Expected > 0 {
			r.MinMemberShare = min(r.MinMemberShare, float64(pt.Delivered)/float64(pt.Expected))
		}
	}
	for _, n := range perRelay {
		r.RelayMaxCircuits = max(r.RelayMaxCircuits, n)
	}
	fillLatency(r)
	if len(t.Resolves) > 0 {
		slices.Sort(t.Resolves)
		r.ResolveP50, r.ResolveP99 = int64(quantileD(t.Resolves, 0.5)), int64(quantileD(t.Resolves, 0.99))
	}
	if r.Delivered > 0 {
		r.BytesPerDelivery = float64(bytesOut) / float64(r.Delivered)
	}
	return r, nil
}

// propagatePeer is one peer's propagate case: peer 1's advertisement,
// every peer a member, the first Publishers peers publishing.
func propagatePeer(ctx context.Context, s *swarm, p *swarmPeer, c SwarmCoordinator, t *peerTally) error {
	cfg := s.cfg
	var mine []byte
	if c.Seq() == 1 {
		a, err := adv.New(adv.Propagate, "lab-swarm", "")
		if err != nil {
			return err
		}
		if mine, err = a.Marshal(); err != nil {
			return err
		}
	}
	advs, err := c.Share(ctx, "propagate-adv", mine)
	if err != nil {
		return err
	}
	a, err := adv.Parse(advs[0])
	if err != nil {
		return err
	}
	pr := &propagateRun{s: s, a: a}
	if err := pr.member(p); err != nil {
		return err
	}
	if err := c.Barrier(ctx, "members"); err != nil {
		return err
	}
	publisher := c.Seq() <= cfg.Publishers
	var pubs []int
	for i := range cfg.Publishers {
		pubs = append(pubs, i)
	}
	var out *pipe.OutputPipe
	if publisher {
		if out, err = p.ps.NewOutputPipe(ctx, a); err != nil {
			return err
		}
		pr.pubs, pr.outs = []*swarmPeer{p}, []*pipe.OutputPipe{out}
	}
	// Publishers probe until every peer has heard every publisher.
	heard := make(chan struct{})
	var probing sync.WaitGroup
	if publisher {
		probing.Add(1)
		go func() {
			defer probing.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				out.Send(ctx, swarmMessage(swarmPayload(swarmHeader, p.idx, 0, kindProbe)))
				select {
				case <-tick.C:
				case <-heard:
					return
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	wctx, cancel := context.WithTimeout(ctx, swarmMeshWait)
	err = waitFor(wctx, func() bool { return s.rec.probed(p.idx, pubs) })
	cancel()
	if err == nil {
		err = c.Barrier(ctx, "heard")
	}
	close(heard)
	probing.Wait()
	if err != nil {
		return fmt.Errorf("propagate mesh: peer %d heard not every publisher within %v: %w", c.Seq(), swarmMeshWait, err)
	}
	before := bytesOut(ctx, []*swarmPeer{p})
	var sent []swarmMsg
	if publisher {
		// This peer's share of the rate.
		pr.s.cfg.Rate = cfg.Rate / float64(cfg.Publishers)
		sent, t.Failures = pr.publish(ctx)
	}
	b, _ := json.Marshal(sent)
	all, err := c.Share(ctx, "sent", b)
	if err != nil {
		return err
	}
	var want []swarmMsg
	for _, b := range all {
		var m []swarmMsg
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		want = append(want, m...)
	}
	s.drain(ctx, map[int][]swarmMsg{p.idx: want})
	var one SwarmResult
	s.rec.tally(&one, []int{p.idx}, kindData, want)
	t.Expected, t.Delivered, t.Duplicates, t.Latencies = one.Expected, one.Delivered, one.Duplicates, one.Latencies
	t.BytesOut = bytesOut(ctx, []*swarmPeer{p}) - before
	return nil
}

// resolvePeer is one peer's resolve case: it binds its own pipe, then
// resolves Targets others' with no hint and sends to each.
func resolvePeer(ctx context.Context, s *swarm, p *swarmPeer, c SwarmCoordinator, t *peerTally) error {
	cfg := s.cfg
	up := &unicastPipe{}
	if err := s.bindUnicast(p, up); err != nil {
		return err
	}
	x, err := up.a.Marshal()
	if err != nil {
		return err
	}
	all, err := c.Share(ctx, "resolve-adv", x)
	if err != nil {
		return err
	}
	advs := make([]*adv.PipeAdvertisement, len(all))
	for i, b := range all {
		if advs[i], err = adv.Parse(b); err != nil {
			return fmt.Errorf("peer %d's advertisement: %w", i+1, err)
		}
	}
	// The next peer's binding is in the DHT: bindings publish theirs in
	// the background.
	next := c.Seq() % len(advs)
	if err := s.waitProviders(ctx, map[int]*unicastPipe{next: {a: advs[next]}}); err != nil {
		return err
	}
	if err := c.Barrier(ctx, "provided"); err != nil {
		return err
	}
	before := bytesOut(ctx, []*swarmPeer{p})
	// Every peer's targets, drawn from a generator of its own, so each
	// knows who sends to it.
	targets := func(seq int) []int {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(seq)<<32|0x7e5))
		var out []int
		for _, i := range rng.Perm(len(advs)) {
			if i != seq-1 && len(out) < cfg.Targets {
				out = append(out, i)
			}
		}
		return out
	}
	var (
		mu    sync.Mutex
		sends sync.WaitGroup
	)
	for _, i := range targets(c.Seq()) {
		sends.Add(1)
		go func() {
			defer sends.Done()
			took, err := sendOne(ctx, p, advs[i], cfg.Size, i)
			mu.Lock()
			defer mu.Unlock()
			if took > 0 {
				t.Resolves = append(t.Resolves, took)
			}
			if err != nil {
				t.Failures++
				s.progress("swarm resolve: peer %d to %d: %v", c.Seq(), i+1, err)
			}
		}()
	}
	sends.Wait()
	var want []swarmMsg
	for seq := 1; seq <= len(advs); seq++ {
		if slices.Contains(targets(seq), p.idx) {
			want = append(want, swarmMsg{kind: kindUnicast, from: seq - 1, seq: p.idx})
		}
	}
	if err := c.Barrier(ctx, "sent"); err != nil {
		return err
	}
	s.drain(ctx, map[int][]swarmMsg{p.idx: want})
	var one SwarmResult
	tallyEach(&one, s.rec, map[int][]swarmMsg{p.idx: want})
	t.Expected, t.Delivered, t.Duplicates, t.Latencies = one.Expected, one.Delivered, one.Duplicates, one.Latencies
	t.BytesOut = bytesOut(ctx, []*swarmPeer{p}) - before
	return nil
}

// relayPeer is one peer's relay case: private peers bind a pipe each;
// senders send to Targets of them, dealt round-robin (as RunSwarm does),
// through the private peer's relay.
func relayPeer(ctx context.Context, s *swarm, p *swarmPeer, c SwarmCoordinator, infos []peer.AddrInfo, t *peerTally) error {
	cfg := s.cfg
	seq := c.Seq()
	role := peerRole(cfg, seq)
	var x []byte
	if role == rolePrivate {
		up := &unicastPipe{}
		if err := s.bindUnicast(p, up); err != nil {
			return err
		}
		var err error
		if x, err = up.a.Marshal(); err != nil {
			return err
		}
	}
	all, err := c.Share(ctx, "relay-adv", x)
	if err != nil {
		return err
	}
	var privs, senders []int // seqs
	for q := 1; q <= cfg.Peers; q++ {
		switch peerRole(cfg, q) {
		case rolePrivate:
			privs = append(privs, q)
		case roleSender:
			senders = append(senders, q)
		}
	}
	if len(senders) == 0 {
		return fmt.Errorf("%w: %d peers leave no sender beside %d relays and %d private peers", ErrSwarmConfig, cfg.Peers, cfg.Relays, len(privs))
	}
	k := min(cfg.Targets, len(privs))
	targets := func(q int) []int { // private seqs sender q sends to
		j := slices.Index(senders, q)
		var out []int
		for i := range k {
			out = append(out, privs[(j*k+i)%len(privs)])
		}
		return out
	}
	if role == roleSender {
		var (
			mu    sync.Mutex
			sends sync.WaitGroup
		)
		for _, q := range targets(seq) {
			a, err := adv.Parse(all[q-1])
			if err != nil {
				return fmt.Errorf("peer %d's advertisement: %w", q, err)
			}
			rl := infos[relayOf(cfg, q)-1]
			circuit, err := ma.NewMultiaddr(rl.Addrs[0].String() + "/p2p/" + rl.ID.String() + "/p2p-circuit")
			if err != nil {
				return err
			}
			sends.Add(1)
			go func() {
				defer sends.Done()
				_, err := sendOne(ctx, p, a, cfg.Size, q-1, pipe.ToPeers(peer.AddrInfo{ID: infos[q-1].ID, Addrs: []ma.Multiaddr{circuit}}))
				if err != nil {
					mu.Lock()
					t.Failures++
					mu.Unlock()
					s.progress("swarm relay: peer %d to %d: %v", seq, q, err)
				}
			}()
		}
		sends.Wait()
	}
	if err := c.Barrier(ctx, "sent"); err != nil {
		return err
	}
	if role != rolePrivate {
		return nil
	}
	var want []swarmMsg
	for _, q := range senders {
		if slices.Contains(targets(q), seq) {
			want = append(want, swarmMsg{kind: kindUnicast, from: q - 1, seq: p.idx})
		}
	}
	s.drain(ctx, map[int][]swarmMsg{p.idx: want})
	var one SwarmResult
	tallyEach(&one, s.rec, map[int][]swarmMsg{p.idx: want})
	t.Expected, t.Delivered, t.Duplicates, t.Latencies = one.Expected, one.Delivered, one.Duplicates, one.Latencies
	for _, conn := range p.n.Host().Network().Conns() {
		if conn.Stat().Limited {
			t.Circuits++
		}
	}
	return nil
}
