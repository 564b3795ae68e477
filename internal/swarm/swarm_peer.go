package swarm

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/p2pmsg/p2pmsg/internal/english"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// Coordinator is what one peer of a swarm spread over processes
// needs from its run: its number and rendezvous with the others.
// Testground's sync service provides it (testplans/swarm).
type Coordinator interface {
	// Seq is this peer's number, 1 to Config.Peers.
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
	FirstFailure                              string // the first failure's error
	Latencies, Resolves                       []time.Duration
	RSS, PSS                                  int64
	Goroutines, Conns                         int
	BytesOut                                  int64
	Circuits                                  int // relay: relayed connections to this private peer
	// churn, from peer 1 only: the unicast accounting
	Accepted, Refused, Reported, UnicastDelivered, Lost int
	GossipDropped                                       uint64
	Shortfall                                           string // what this member missed (tallyMember)
}

// fail counts a failure and keeps its description if it is the first.
func (t *peerTally) fail(msg string) {
	t.Failures++
	if t.FirstFailure == "" {
		t.FirstFailure = msg
	}
}

// tallyMember waits for member p's deliveries of want, all of one kind,
// and counts them into t. If some never came it says in t.Shortfall
// which, and for propagate messages what p's gossipsub router counted:
// a stretch of one publisher's numbers missing is a member cut off for
// a while, numbers scattered over the run are copies dropped.
func (s *swarm) tallyMember(ctx context.Context, p *swarmPeer, t *peerTally, kind int, want []swarmMsg) {
	s.drain(ctx, map[int][]swarmMsg{p.idx: want})
	var one Result
	s.rec.tally(&one, []int{p.idx}, kind, want)
	t.Expected, t.Delivered, t.Duplicates, t.Latencies = one.Expected, one.Delivered, one.Duplicates, one.Latencies
	if one.Delivered == one.Expected {
		return
	}
	missing := map[int][]int{} // by sender idx: message numbers
	for _, m := range want {
		if !s.rec.has(p.idx, m) {
			missing[m.from] = append(missing[m.from], m.seq)
		}
	}
	var from []string
	for _, f := range slices.Sorted(maps.Keys(missing)) {
		if kind == kindData {
			from = append(from, fmt.Sprintf("peer %d's %s", f+1, numberRanges(missing[f])))
		} else {
			from = append(from, fmt.Sprintf("peer %d", f+1))
		}
	}
	what := strings.Join(from, ", ")
	if kind != kindData {
		what = "messages from " + what
	}
	t.Shortfall = fmt.Sprintf("peer %d got %d of %d, missing %s; %s", p.idx+1, one.Delivered, one.Expected,
		what, english.Count(len(p.n.Host().Network().Peers()), "connection", "connections"))
	if kind == kindData {
		st := p.ps.Stats()
		t.Shortfall += fmt.Sprintf("; its router counted %d undelivered, %d dropped inbound, %d dropped outbound, %d replays, %d rejected",
			st.PropagateUndelivered, st.PropagateInboundDropped, st.PropagateOutboundDropped, st.PropagateReplays, st.PropagateRejected)
	}
}

// numberRanges writes sorted distinct numbers as ranges: "#3, #7–#9".
func numberRanges(v []int) string {
	slices.Sort(v)
	var b strings.Builder
	for i := 0; i < len(v); {
		j := i
		for j+1 < len(v) && v[j+1] == v[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		if j == i {
			fmt.Fprintf(&b, "#%d", v[i])
		} else {
			fmt.Fprintf(&b, "#%d–#%d", v[i], v[j])
		}
		i = j + 1
	}
	return b.String()
}

// PeerCases are the cases RunPeer runs.
var PeerCases = []string{Propagate, Resolve, Relay, Churn}

// Roles of a peer in RunPeer's relay case; every peer is a sender
// in the others.
const (
	roleSender = iota
	roleRelay
	rolePrivate
	roleLeaver
	roleJoiner
)

// peerRole: in the relay case, the first Relays peers are relays and the
// last RelayFraction of them private; in the churn case, the churnCount
// peers after the publishers leave and the last churnCount join, each
// joiner taking its leaver's place.
func peerRole(cfg Config, seq int) int {
	if cfg.Cases[0] == Churn {
		n := churnCount(cfg)
		switch {
		case seq > cfg.Publishers && seq <= cfg.Publishers+n:
			return roleLeaver
		case seq > cfg.Peers-n:
			return roleJoiner
		}
		return roleSender
	}
	if cfg.Cases[0] != Relay {
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
func privateCount(cfg Config) int {
	return max(1, int(math.Round(cfg.RelayFraction*float64(cfg.Peers))))
}

// relayOf is the relay private peer seq reserves on, its k-th private
// peer on relay k modulo Relays.
func relayOf(cfg Config, seq int) int {
	return 1 + (seq-(cfg.Peers-privateCount(cfg))-1)%cfg.Relays
}

// RunPeer runs this process's peer in one case (PeerCases) of a
// swarm whose other cfg.Peers-1 peers run the same function elsewhere,
// listening on listen (the relay case's private peers listen nowhere). The peer with Seq 1 returns
// the case's result, the others nil. Per-peer cost is each process's
// whole RSS, goroutines and connections, averaged over the peers.
func RunPeer(ctx context.Context, cfg Config, c Coordinator, listen string) (*Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if len(cfg.Cases) != 1 || !slices.Contains(PeerCases, cfg.Cases[0]) {
		return nil, fmt.Errorf("%w: a peer runs one case of %v", ErrConfig, PeerCases)
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
		// The private peers may all share one address (127.0.0.1 in
		// lab swarm and a plan run without Docker), as peers behind one
		// NAT do: each may take its reservation here.
		perIP := max(node.RelayMaxReservationsPerIP, privateCount(cfg))
		p, err = s.joinVia(ctx, nil, true, node.WithListenAddrs(listen), node.WithRelayService(), node.WithRelayReservationsPerIP(perIP), node.WithLibp2pOptions(libp2p.ForceReachabilityPublic()))
	case rolePrivate:
		p, err = s.joinVia(ctx, nil, false, node.WithListenAddrs(), node.WithLibp2pOptions(libp2p.NoListenAddrs, libp2p.ForceReachabilityPrivate(), noHolePunching))
	case roleJoiner: // starts later
	default:
		p, err = s.joinVia(ctx, nil, true, node.WithListenAddrs(listen))
	}
	if err != nil {
		return nil, err
	}
	// Everyone's address; each connects to Degree random others.
	ai := []byte("{}")
	if p != nil {
		ai, _ = json.Marshal(p.n.AddrInfo())
	}
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
		_, err := p.n.Reserve(cctx, rl)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("reserving on relay %s: %w", rl.ID, err)
		}
	} else if p != nil {
		connectSome(ctx, cfg, p, seq, infos)
	}
	if err := c.Barrier(ctx, "connected"); err != nil {
		return nil, err
	}
	if p != nil {
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		p.n.RefreshRouting(rctx)
		cancel()
	}
	if err := c.Barrier(ctx, "routed"); err != nil {
		return nil, err
	}
	if seq == 1 {
		s.progress("swarm %s: %d peers connected, their DHTs refreshed", cfg.Cases[0], cfg.Peers)
	}
	var t peerTally
	switch cfg.Cases[0] {
	case Propagate:
		err = propagatePeer(ctx, s, p, c, &t)
	case Resolve:
		err = resolvePeer(ctx, s, p, c, &t)
	case Relay:
		err = relayPeer(ctx, s, p, c, infos, &t)
	case Churn:
		p, err = churnPeer(ctx, s, p, c, infos, listen, &t)
	}
	if err != nil {
		return nil, err
	}
	t.Conns = len(p.n.Host().Network().Conns())
	if cfg.base == nil || seq == 1 {
		// A process of its own, or peer 1 for a process of many peers.
		t.RSS, t.PSS, t.Goroutines = rssBytes(), pssBytes(), runtime.NumGoroutine()
	}
	st := p.ps.Stats()
	t.GossipDropped = st.PropagateOutboundDropped + st.PropagateInboundDropped + st.PropagateUndelivered
	if seq == 1 {
		s.progress("swarm %s: run over, tallying", cfg.Cases[0])
	}
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
	// Peers are those present at any time, as lab swarm reports them: in
	// churn, cfg.Peers (the plan's instances) counts the joiners too.
	present := cfg.Peers
	if cfg.Cases[0] == Churn {
		present -= churnCount(cfg)
	}
	r := &Result{Case: cfg.Cases[0], Peers: present, MinMemberShare: 1}
	var bytesOut int64
	var resolves []time.Duration
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
		if r.FirstFailure == "" {
			r.FirstFailure = pt.FirstFailure
		}
		if r.Shortfall == "" {
			r.Shortfall = pt.Shortfall
		}
		r.Latencies = append(r.Latencies, pt.Latencies...)
		resolves = append(resolves, pt.Resolves...)
		if cfg.base == nil {
			r.RSSPerPeer += pt.RSS / int64(len(tallies))
			r.PSSPerPeer += pt.PSS / int64(len(tallies))
			r.GoroutinesPerPeer += float64(pt.Goroutines) / float64(len(tallies))
		}
		r.ConnsPerPeer += float64(pt.Conns) / float64(len(tallies))
		bytesOut += pt.BytesOut
		r.Accepted += pt.Accepted
		r.Refused += pt.Refused
		r.Reported += pt.Reported
		r.UnicastDelivered += pt.UnicastDelivered
		r.Lost += pt.Lost
		r.GossipDropped += pt.GossipDropped
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
	if b := cfg.base; b != nil {
		// All peers in this process, measured by peer 1 while all were up.
		r.RSSPerPeer = max(0, t.RSS-b.rss) / int64(len(tallies))
		r.PSSPerPeer = max(0, t.PSS-b.pss) / int64(len(tallies))
		r.GoroutinesPerPeer = float64(t.Goroutines-b.goroutines) / float64(len(tallies))
	}
	fillLatency(r)
	if len(resolves) > 0 {
		slices.Sort(resolves)
		r.ResolveP50, r.ResolveP99 = int64(quantileD(resolves, 0.5)), int64(quantileD(resolves, 0.99))
	}
	if r.Delivered > 0 {
		r.BytesPerDelivery = float64(bytesOut) / float64(r.Delivered)
	}
	return r, nil
}

// propagatePeer is one peer's propagate case: peer 1's advertisement,
// every peer a member, the first Publishers peers publishing.
func propagatePeer(ctx context.Context, s *swarm, p *swarmPeer, c Coordinator, t *peerTally) error {
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
	if err := meshReady(ctx, s, p, c, out, pubs); err != nil {
		return err
	}
	before := bytesOut(ctx, []*swarmPeer{p})
	var sent []swarmMsg
	if publisher {
		// This peer's share of the rate.
		pr.s.cfg.Rate = cfg.Rate / float64(cfg.Publishers)
		sent = pr.publish(ctx, t)
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
	s.tallyMember(ctx, p, t, kindData, want)
	t.BytesOut = bytesOut(ctx, []*swarmPeer{p}) - before
	return nil
}

// resolvePeer is one peer's resolve case: it binds its own pipe, then
// resolves Targets others' with no hint and sends to each.
func resolvePeer(ctx context.Context, s *swarm, p *swarmPeer, c Coordinator, t *peerTally) error {
	cfg := s.cfg
	a, err := s.bindUnicast(p, nil)
	if err != nil {
		return err
	}
	x, err := a.Marshal()
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
	if err := waitProvider(ctx, p, advs[next]); err != nil {
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
	// One pipe after the other, as a program opens them: every peer
	// starts at the same barrier, and Targets resolutions at once from
	// each would measure a herd of our own making.
	for _, i := range targets(c.Seq()) {
		took, err := sendOne(ctx, p, advs[i], cfg.Size, i)
		if took > 0 {
			t.Resolves = append(t.Resolves, took)
		}
		if err != nil {
			msg := fmt.Sprintf("resolve: peer %d to %d: %v", c.Seq(), i+1, err)
			t.fail(msg)
			s.progress("swarm %s", msg)
		}
	}
	var want []swarmMsg
	for seq := 1; seq <= len(advs); seq++ {
		if slices.Contains(targets(seq), p.idx) {
			want = append(want, swarmMsg{kind: kindUnicast, from: seq - 1, seq: p.idx})
		}
	}
	if err := c.Barrier(ctx, "sent"); err != nil {
		return err
	}
	s.tallyMember(ctx, p, t, kindUnicast, want)
	t.BytesOut = bytesOut(ctx, []*swarmPeer{p}) - before
	return nil
}

// relayPeer is one peer's relay case: private peers bind a pipe each;
// senders send to Targets of them, dealt round-robin (as Run does),
// through the private peer's relay.
func relayPeer(ctx context.Context, s *swarm, p *swarmPeer, c Coordinator, infos []peer.AddrInfo, t *peerTally) error {
	cfg := s.cfg
	seq := c.Seq()
	role := peerRole(cfg, seq)
	var x []byte
	if role == rolePrivate {
		a, err := s.bindUnicast(p, nil)
		if err != nil {
			return err
		}
		if x, err = a.Marshal(); err != nil {
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
		return fmt.Errorf("%w: %d peers leave no sender beside %d relays and %d private peers", ErrConfig, cfg.Peers, cfg.Relays, len(privs))
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
					msg := fmt.Sprintf("relay: peer %d to %d: %v", seq, q, err)
					mu.Lock()
					t.fail(msg)
					mu.Unlock()
					s.progress("swarm %s", msg)
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
	s.tallyMember(ctx, p, t, kindUnicast, want)
	for _, conn := range p.n.Host().Network().Conns() {
		if conn.Stat().Limited {
			t.Circuits++
		}
	}
	return nil
}

// meshReady returns once every peer present has heard a probe from every
// publisher (pubs, by index): publishers (out not nil) probe until then.
// A peer not present (p nil) only meets the others at the barrier.
func meshReady(ctx context.Context, s *swarm, p *swarmPeer, c Coordinator, out *pipe.OutputPipe, pubs []int) error {
	heard := make(chan struct{})
	var probing sync.WaitGroup
	if out != nil {
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
	var err error
	if p != nil {
		wctx, cancel := context.WithTimeout(ctx, swarmMeshWait)
		err = waitFor(wctx, func() bool { return s.rec.probed(p.idx, pubs) })
		cancel()
		// Only its own wait running out says the mesh is short; the run's
		// end (interrupted, or another peer failed) says just that.
		if err != nil && ctx.Err() == nil {
			err = fmt.Errorf("peer %d heard not every publisher within %v", c.Seq(), swarmMeshWait)
		}
	}
	if err == nil {
		err = c.Barrier(ctx, "heard")
	}
	close(heard)
	probing.Wait()
	if err != nil {
		return fmt.Errorf("propagate mesh: %w", err)
	}
	return nil
}

// connectSome connects p to Degree random peers of infos that have an
// address, best effort: the DHT finds the rest.
func connectSome(ctx context.Context, cfg Config, p *swarmPeer, seq int, infos []peer.AddrInfo) {
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(seq)))
	for _, i := range rng.Perm(len(infos)) {
		if i == seq-1 || len(infos[i].Addrs) == 0 || len(p.n.Host().Network().Peers()) >= cfg.Degree {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, swarmSendWait)
		p.n.Connect(cctx, infos[i])
		cancel()
	}
}

// churnCount is how many peers leave (and join) in the churn case of
// RunPeer: ChurnFraction of the peers present at any time.
func churnCount(cfg Config) int {
	f := cfg.ChurnFraction
	return max(1, int(math.Round(f*float64(cfg.Peers)/(1+f))))
}

// churnReport is what a peer shares after the churn case's run.
type churnReport struct {
	Logs     []*pairLog        `json:"logs,omitempty"`     // a stable peer's unicast accounting
	Received []swarmMsg        `json:"received,omitempty"` // unicast messages this peer's pipe got
	First    map[int]time.Time `json:"first,omitempty"`    // by sender: a joiner's first unicast delivery
	Departed time.Time         `json:"departed,omitzero"`  // a leaver's departure
	Stable   bool              `json:"stable,omitempty"`
	Sent     []swarmMsg        `json:"sent,omitempty"` // a publisher's propagate messages
}

// churnPeer is one peer's churn case (see Churn and peerRole): the
// present peers are members of a propagate pipe and bind a unicast pipe
// each; the publishers publish; every stable peer sends flushed messages
// to Targets pipes; leavers leave abruptly at their time, and joiners
// join then, binding their leaver's pipe. It returns this process's peer
// (a joiner's is new).
func churnPeer(ctx context.Context, s *swarm, p *swarmPeer, c Coordinator, infos []peer.AddrInfo, listen string, t *peerTally) (*swarmPeer, error) {
	cfg := s.cfg
	seq := c.Seq()
	role := peerRole(cfg, seq)
	n := churnCount(cfg)
	var x []byte
	if seq == 1 {
		a, err := adv.New(adv.Propagate, "lab-swarm", "")
		if err != nil {
			return p, err
		}
		if x, err = a.Marshal(); err != nil {
			return p, err
		}
	}
	advs, err := c.Share(ctx, "propagate-adv", x)
	if err != nil {
		return p, err
	}
	a, err := adv.Parse(advs[0])
	if err != nil {
		return p, err
	}
	pr := &propagateRun{s: s, a: a}
	var mine []byte
	if p != nil {
		if err := pr.member(p); err != nil {
			return p, err
		}
		a, err := s.bindUnicast(p, nil)
		if err != nil {
			return p, err
		}
		if mine, err = a.Marshal(); err != nil {
			return p, err
		}
	}
	all, err := c.Share(ctx, "churn-adv", mine)
	if err != nil {
		return p, err
	}
	slots := map[int]*adv.PipeAdvertisement{} // by binder's seq, joiners excluded
	for i, b := range all {
		if len(b) > 0 {
			if slots[i+1], err = adv.Parse(b); err != nil {
				return p, fmt.Errorf("peer %d's advertisement: %w", i+1, err)
			}
		}
	}
	var out *pipe.OutputPipe
	var pubs []int
	for i := range cfg.Publishers {
		pubs = append(pubs, i)
	}
	if seq <= cfg.Publishers {
		if out, err = p.ps.NewOutputPipe(ctx, a); err != nil {
			return p, err
		}
		pr.pubs, pr.outs = []*swarmPeer{p}, []*pipe.OutputPipe{out}
	}
	if err := meshReady(ctx, s, p, c, out, pubs); err != nil {
		return p, err
	}
	if p != nil {
		next := seq%len(all) + 1
		for slots[next] == nil || next == seq {
			next = next%len(all) + 1
		}
		if err := waitProvider(ctx, p, slots[next]); err != nil {
			return p, err
		}
	}
	if err := c.Barrier(ctx, "provided"); err != nil {
		return p, err
	}
	// The run. Times count from the barrier's end, in every process.
	start := time.Now()
	at := func(j int) time.Time { // leaver j's departure, joiner j's arrival
		return start.Add(time.Duration(float64(cfg.Duration) * (0.2 + 0.6*float64(j)/float64(n))))
	}
	var rep churnReport
	stop := make(chan struct{})
	var sendWG sync.WaitGroup
	switch role {
	case roleSender: // the publishers too
		rep.Stable = true
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(seq)<<32|0xc4))
		var targets []int
		for _, i := range rng.Perm(len(all)) {
			if q := i + 1; q != seq && slots[q] != nil && len(targets) < cfg.Targets {
				targets = append(targets, q)
			}
		}
		for _, q := range targets {
			l := &pairLog{From: p.idx, Pipe: q}
			rep.Logs = append(rep.Logs, l)
			sendWG.Add(1)
			go func() {
				defer sendWG.Done()
				churnSender(ctx, stop, p, slots[q], cfg.Size, l)
			}()
		}
	case roleLeaver:
		j := seq - cfg.Publishers - 1
		if err := sleepCtx(ctx, time.Until(at(j))); err != nil {
			return p, err
		}
		rep.Departed = time.Now()
		p.n.Host().Close() // abruptly: the services stay up, their connections gone
	case roleJoiner:
		j := seq - (cfg.Peers - n) - 1
		if err := sleepCtx(ctx, time.Until(at(j))); err != nil {
			return p, err
		}
		// Its DHT starts from Degree peers present, as a joining node's
		// does, so that its binding's provider record finds a home.
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(seq)))
		var boot []peer.AddrInfo
		for _, i := range rng.Perm(len(infos)) {
			if r := peerRole(cfg, i+1); r != roleLeaver && r != roleJoiner && len(boot) < cfg.Degree {
				boot = append(boot, infos[i])
			}
		}
		if p, err = joinRetrying(ctx, s, seq, boot, listen); err != nil {
			return p, err
		}
		if err := pr.member(p); err != nil {
			return p, err
		}
		leaver := cfg.Publishers + 1 + j
		if _, err := s.bindUnicast(p, slots[leaver]); err != nil {
			return p, err
		}
	}
	var sent []swarmMsg
	if seq <= cfg.Publishers {
		pr.s.cfg.Rate = cfg.Rate / float64(cfg.Publishers)
		sent = pr.publish(ctx, t)
	}
	if err := c.Barrier(ctx, "published"); err != nil {
		return p, err
	}
	// The senders go on long enough for the last joiner's binding to be
	// found.
	sleepCtx(ctx, churnResolveWait)
	close(stop)
	sendWG.Wait()
	if err := c.Barrier(ctx, "sent"); err != nil {
		return p, err
	}
	rep.Sent = sent
	b, _ := json.Marshal(sent)
	sents, err := c.Share(ctx, "sent", b)
	if err != nil {
		return p, err
	}
	var want []swarmMsg
	for _, b := range sents {
		var m []swarmMsg
		if err := json.Unmarshal(b, &m); err != nil {
			return p, err
		}
		want = append(want, m...)
	}
	if rep.Stable {
		s.tallyMember(ctx, p, t, kindData, want)
	}
	if p != nil {
		rep.Received, rep.First = s.rec.unicastAt(p.idx)
	}
	b, _ = json.Marshal(rep)
	reps, err := c.Share(ctx, "churn-report", b)
	if err != nil {
		return p, err
	}
	if seq != 1 {
		return p, nil
	}
	// Peer 1 accounts for every unicast message.
	got := map[int]map[swarmMsg]bool{} // by receiver seq
	all2 := make([]churnReport, len(reps))
	for i, b := range reps {
		if err := json.Unmarshal(b, &all2[i]); err != nil {
			return p, fmt.Errorf("peer %d's report: %w", i+1, err)
		}
		got[i+1] = map[swarmMsg]bool{}
		for _, m := range all2[i].Received {
			got[i+1][m] = true
		}
	}
	for _, r := range all2 {
		for _, l := range r.Logs {
			t.Accepted += len(l.Accepted)
			t.Refused += l.Rejected
			binders := []int{l.Pipe}
			if peerRole(cfg, l.Pipe) == roleLeaver {
				binders = append(binders, cfg.Peers-n+1+(l.Pipe-cfg.Publishers-1))
			}
			for _, q := range l.Accepted {
				m := swarmMsg{kind: kindUnicast, from: l.From, seq: q}
				switch {
				case got[binders[0]][m] || len(binders) > 1 && got[binders[1]][m]:
					// A Flush error says "maybe lost": delivered
					// anyway counts as delivered.
					t.UnicastDelivered++
				case slices.Contains(l.Reported, q):
					t.Reported++
				default:
					t.Lost++
					s.progress("swarm churn: message %d from peer %d to pipe %d was accepted and flushed without an error, and never delivered", q, l.From+1, l.Pipe)
				}
			}
			if len(binders) > 1 {
				if first, ok := all2[binders[1]-1].First[l.From]; ok {
					t.Resolves = append(t.Resolves, first.Sub(all2[l.Pipe-1].Departed))
				} else {
					t.fail(fmt.Sprintf("churn: peer %d's messages never reached pipe %d's new binder", l.From+1, l.Pipe))
				}
			}
		}
	}
	return p, nil
}

// joinAttempts bounds a churn joiner's attempts to start: on two loaded
// cores a bootstrap peer's handshake can outlast libp2p's dial timeout,
// and a joining node tries again, as a program would.
const joinAttempts = 3

// joinRetrying starts churn joiner seq's peer, bootstrapped from boot,
// trying again after a failure.
func joinRetrying(ctx context.Context, s *swarm, seq int, boot []peer.AddrInfo, listen string) (*swarmPeer, error) {
	var err error
	for range joinAttempts {
		s.mu.Lock()
		s.next = seq - 1 // the peer's index is its number, whatever the attempt
		s.mu.Unlock()
		var p *swarmPeer
		if p, err = s.joinVia(ctx, boot, true, node.WithListenAddrs(listen)); err == nil || ctx.Err() != nil {
			return p, err
		}
		s.progress("swarm churn: peer %d failed to join, again: %v", seq, err)
	}
	return nil, err
}
