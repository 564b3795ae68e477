package swarm

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/metrics"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/internal/english"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// Swarm cases (Config.Cases).
const (
	// Idle builds the swarm, lets it settle and measures what each
	// idle peer costs.
	Idle = "idle"
	// Propagate: Publishers peers send at Rate to a propagate pipe
	// whose members are all the peers.
	Propagate = "propagate"
	// Resolve: every peer binds a unicast input pipe; each resolves
	// Targets others' pipes with no hint (the DHT and the resolver
	// protocol) and sends to them.
	Resolve = "resolve"
	// Relay: RelayFraction of the peers have no address of their
	// own and reserve on Relays relay peers; every other peer sends to
	// Targets of them by pipe, through the relays.
	Relay = "relay"
	// Churn: ChurnFraction of the peers leave abruptly, one by one,
	// and new peers take their place, during a propagate run and while
	// every stable peer keeps sending to Targets unicast pipes.
	Churn = "churn"
)

// Cases lists the cases in the order Run runs them.
var Cases = []string{Idle, Propagate, Resolve, Relay, Churn}

// ErrUnknownCase reports a swarm case Run does not know.
var ErrUnknownCase = errors.New("swarm: unknown case")

// ErrConfig reports a Config Run cannot run.
var ErrConfig = errors.New("swarm: invalid configuration")

// Config configures Run. Zero fields take the defaults given.
type Config struct {
	Peers         int           // peers, each a node with its own host, endpoint, pipe service and DHT (default 20)
	Cases         []string      // default all of Cases
	Publishers    int           // propagate and churn: publishing peers (default 4)
	Rate          float64       // propagate and churn: messages a second, all publishers together (default 100)
	Duration      time.Duration // propagate and churn: how long the publishers send (default 5 s)
	Targets       int           // resolve, relay, churn: pipes each sending peer sends to (default 3)
	Size          int           // payload bytes (default 100, at least swarmHeader)
	Degree        int           // peers a joining peer connects to (default 4)
	RelayFraction float64       // relay: the fraction of peers without an address (default 0.2)
	Relays        int           // relay: relay peers (default 2)
	ChurnFraction float64       // churn: the fraction of peers replaced (default 0.2)
	Settle        time.Duration // idle: how long the swarm settles before it is measured (default Settle)
	Seed          uint64        // picks of peers; 0 picks one
	Progress      func(string)  // called with a line of progress, or nil

	// base is the process before the swarm, when all its peers run in
	// this process (Run): peer 1 then measures the process's cost
	// for all of them.
	base *usage
}

// Result is one case's figures. Latencies run from the sending call
// to the receiving peer's Receive, both timed by this process's clock.
type Result struct {
	Case       string `json:"case"`
	Peers      int    `json:"peers"`
	Expected   int    `json:"expected"`   // deliveries expected
	Delivered  int    `json:"delivered"`  // distinct messages delivered where expected
	Duplicates int    `json:"duplicates"` // deliveries of a message a member already had
	P50        int64  `json:"p50_ns"`
	P99        int64  `json:"p99_ns"`
	Max        int64  `json:"max_ns"`
	// Failures counts sending calls that failed (and, for resolve and
	// relay, pipes that could not be resolved or reached).
	Failures int `json:"failures"`
	// FirstFailure is the error of the first failure a peer reported
	// (the peer with the lowest Seq among those that failed), so that a
	// failed check says why.
	FirstFailure string `json:"first_failure,omitempty"`
	// BytesPerDelivery is what all peers wrote on their libp2p streams
	// during the run (every protocol: gossip, DHT, identify), per
	// delivered message.
	BytesPerDelivery float64 `json:"bytes_per_delivery"`
	// RSSPerPeer is the process's resident memory over its start, per
	// peer, when the case ended; GoroutinesPerPeer and ConnsPerPeer are
	// the same for goroutines and open connections.
	RSSPerPeer int64 `json:"rss_bytes_per_peer"`
	// PSSPerPeer is the same for the proportional set size, in which a
	// page k processes share counts 1/k: the memory a peer adds when
	// many run as processes of one binary, whose code (some 30 MB of
	// p2pmsg's RSS) they share. In one process it is RSSPerPeer within
	// a page or two.
	PSSPerPeer        int64   `json:"pss_bytes_per_peer"`
	GoroutinesPerPeer float64 `json:"goroutines_per_peer"`
	ConnsPerPeer      float64 `json:"conns_per_peer"`
	// GossipDropped sums, over the peers present at the end, what their
	// gossipsub routers dropped and counted (pipe.Stats: outbound,
	// inbound and undelivered propagate messages).
	GossipDropped uint64 `json:"gossip_dropped"`
	// MinMemberShare is the lowest delivered/expected of any member
	// (propagate, and churn's stable members).
	MinMemberShare float64 `json:"min_member_share"`
	// Shortfall says, when a case delivered less than it expected, what
	// the first member to fall short (by peer number) missed: whose
	// messages and, for propagate messages, which numbers and what the
	// member's gossipsub router counted.
	Shortfall string `json:"shortfall,omitempty"`
	// ResolveP50/P99 time the resolutions (resolve, churn's
	// re-resolutions after a binder left: from its departure to the first
	// message its replacement received from each sender).
	ResolveP50 int64 `json:"resolve_p50_ns,omitempty"`
	ResolveP99 int64 `json:"resolve_p99_ns,omitempty"`
	// RelayCircuits counts the relayed connections open to the private
	// peers after the relay case, RelayMaxCircuits those through the
	// busiest relay.
	RelayCircuits    int `json:"relay_circuits,omitempty"`
	RelayMaxCircuits int `json:"relay_max_circuits,omitempty"`
	// Refused, Accepted, UnicastDelivered, Reported and Lost account
	// for churn's unicast messages: Sends that failed (never accepted);
	// Sends that returned nil, which are each either delivered, or not
	// delivered and reported by their Flush (maybe lost), or neither:
	// lost without an error, which must be 0. Accepted is always
	// UnicastDelivered + Reported + Lost.
	Refused          int `json:"refused,omitempty"`
	Accepted         int `json:"accepted,omitempty"`
	UnicastDelivered int `json:"unicast_delivered,omitempty"`
	Reported         int `json:"reported,omitempty"`
	Lost             int `json:"lost"`

	Latencies []time.Duration `json:"-"` // every delivery's, for a CDF
}

func (c Config) withDefaults() Config {
	if c.Peers == 0 {
		c.Peers = 20
	}
	if len(c.Cases) == 0 {
		c.Cases = Cases
	}
	if c.Publishers == 0 {
		c.Publishers = 4
	}
	if c.Rate == 0 {
		c.Rate = 100
	}
	if c.Duration == 0 {
		c.Duration = 5 * time.Second
	}
	if c.Targets == 0 {
		c.Targets = 3
	}
	if c.Size == 0 {
		c.Size = 100
	}
	if c.Degree == 0 {
		c.Degree = 4
	}
	if c.RelayFraction == 0 {
		c.RelayFraction = 0.2
	}
	if c.Relays == 0 {
		c.Relays = 2
	}
	if c.ChurnFraction == 0 {
		c.ChurnFraction = 0.2
	}
	if c.Settle == 0 {
		c.Settle = Settle
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	return c
}

// Check reports whether Run would refuse c (an error matching
// ErrUnknownCase or ErrConfig), without running anything.
func (c Config) Check() error {
	c = c.withDefaults()
	if err := c.check(); err != nil {
		return err
	}
	return c.fitsProcess(openFileLimit())
}

// filesPerPeer is the open files a peer of an in-process swarm holds
// besides one per other peer: within the connection manager's grace
// period (node.ConnGrace) a peer stays connected to nearly every peer the
// DHT and gossipsub led it to (at 100 peers, 98 connections each), and
// each connection is a socket at each end, so a swarm's files grow with
// the square of its peers. Its listeners, the DHT's and the runtime's
// own take a few more.
const filesPerPeer = 8

// fitsProcess refuses a swarm too large for this process's open-file
// limit (0: unknown), which would otherwise fail partway, peers unable
// to accept or dial, after minutes of setup.
func (c Config) fitsProcess(limit int) error {
	if limit <= 0 || c.Peers <= limit && c.Peers*(c.Peers+filesPerPeer) <= limit {
		return nil
	}
	most := 0
	for (most+1)*(most+1+filesPerPeer) <= limit {
		most++
	}
	return fmt.Errorf("%w: a swarm of %d peers in one process holds up to %d² open files (each peer connects to most others); ulimit -n allows %d: use at most %d peers or raise it", ErrConfig, c.Peers, c.Peers, limit, most)
}

func (c Config) check() error {
	for _, name := range c.Cases {
		if !slices.Contains(Cases, name) {
			return fmt.Errorf("%w: %q (cases: %s)", ErrUnknownCase, name, strings.Join(Cases, ", "))
		}
	}
	switch {
	case c.Peers < 4:
		return fmt.Errorf("%w: a swarm of %d peers: use 4 or more", ErrConfig, c.Peers)
	case c.Publishers < 1 || c.Publishers > c.Peers:
		return fmt.Errorf("%w: %d publishers among %d peers", ErrConfig, c.Publishers, c.Peers)
	case !(c.Rate > 0) || math.IsInf(c.Rate, 1) || c.Duration <= 0: // NaN too
		return fmt.Errorf("%w: rate %g for %v", ErrConfig, c.Rate, c.Duration)
	case c.Targets < 1 || c.Targets >= c.Peers:
		return fmt.Errorf("%w: %d targets among %d peers", ErrConfig, c.Targets, c.Peers)
	case c.Size < swarmHeader || c.Size > 64<<10:
		return fmt.Errorf("%w: payload of %d bytes: swarm messages carry a %d-byte header and are at most 64 KiB", ErrConfig, c.Size, swarmHeader)
	case c.Degree < 1:
		return fmt.Errorf("%w: degree %d", ErrConfig, c.Degree)
	case !(c.RelayFraction > 0 && c.RelayFraction < 1 && c.ChurnFraction > 0 && c.ChurnFraction < 1): // NaN too
		return fmt.Errorf("%w: fractions must be in (0, 1)", ErrConfig)
	case c.Relays < 1 || c.Relays+2 > c.Peers:
		return fmt.Errorf("%w: %d relays among %d peers", ErrConfig, c.Relays, c.Peers)
	}
	return nil
}

// Run runs the cases, each on a swarm of its own built for it, and
// returns a result per case. Its peers are RunPeer's, as in the
// swarm Testground plan, all in this process and meeting through an
// in-memory coordinator; for churn, cfg.Peers are present at any time
// (ChurnFraction more peers join as others leave).
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	var out []Result
	for i, name := range cfg.Cases {
		c := cfg
		c.Seed = cfg.Seed + uint64(i)
		var (
			r   Result
			err error
		)
		c.Cases = []string{name}
		if name == Idle {
			r, err = runSwarmIdle(ctx, c)
		} else {
			r, err = runInProcess(ctx, c)
		}
		if err != nil {
			return out, fmt.Errorf("swarm: %s: %w", name, err)
		}
		r.Case, r.Peers = name, cfg.Peers
		out = append(out, r)
	}
	return out, nil
}

// swarmPeer is one peer of a swarm.
type swarmPeer struct {
	idx int
	n   *node.Node
	ep  *endpoint.Service
	ps  *pipe.Service
	bw  *metrics.BandwidthCounter
}

func (p *swarmPeer) close() {
	if p.ps != nil {
		p.ps.Close()
	}
	if p.ep != nil {
		p.ep.Close()
	}
	p.n.Close()
}

// swarm is a set of peers in this process and what is measured of them.
type swarm struct {
	cfg  Config
	rng  *rand.Rand
	base usage // the process before the swarm

	mu    sync.Mutex
	peers []*swarmPeer // by idx; nil once gone
	next  int

	rec *swarmRecorder
}

type usage struct {
	rss, pss   int64
	goroutines int
}

func measureUsage() usage {
	return usage{rss: rssBytes(), pss: pssBytes(), goroutines: runtime.NumGoroutine()}
}

// pssBytes is the process's proportional set size, 0 where
// /proc/self/smaps_rollup (Linux 4.14) is missing.
func pssBytes() int64 {
	return procKB("/proc/self/smaps_rollup", "Pss:")
}

// rssBytes is the process's resident set, 0 where /proc is missing.
func rssBytes() int64 {
	return procKB("/proc/self/status", "VmRSS:")
}

// procKB reads the "key  n kB" line of a /proc file, in bytes; 0 when
// there is none.
func procKB(path, key string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

func newSwarm(cfg Config) *swarm {
	return &swarm{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5741524d)), base: measureUsage(), rec: newSwarmRecorder()}
}

func (s *swarm) progress(format string, args ...any) {
	if s.cfg.Progress != nil {
		s.cfg.Progress(fmt.Sprintf(format, args...))
	}
}

// alive returns the peers present now.
func (s *swarm) alive() []*swarmPeer {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*swarmPeer
	for _, p := range s.peers {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// join starts a peer that connects to Degree random peers present and
// bootstraps its DHT from them. Extra node options come last.
func (s *swarm) join(ctx context.Context, opts ...node.Option) (*swarmPeer, error) {
	present := s.alive()
	s.mu.Lock()
	s.rng.Shuffle(len(present), func(i, j int) { present[i], present[j] = present[j], present[i] })
	s.mu.Unlock()
	var boot []peer.AddrInfo
	for _, p := range present {
		if len(boot) == s.cfg.Degree {
			break
		}
		if len(p.n.Addrs()) > 0 {
			boot = append(boot, p.n.AddrInfo())
		}
	}
	return s.joinVia(ctx, boot, true, opts...)
}

// joinVia starts a peer that connects to boot and, with dht, bootstraps a
// DHT server from them.
func (s *swarm) joinVia(ctx context.Context, boot []peer.AddrInfo, dht bool, opts ...node.Option) (*swarmPeer, error) {
	s.mu.Lock()
	idx := s.next
	s.next++
	s.mu.Unlock()
	bw := metrics.NewBandwidthCounter()
	base := []node.Option{node.WithEphemeralKey(), node.WithListenAddrs("/ip4/127.0.0.1/tcp/0"),
		node.WithBootstrapPeers(boot...), node.WithLibp2pOptions(libp2p.BandwidthReporter(bw))}
	if dht {
		base = append(base, node.WithDHT(node.DHTServer))
	}
	n, err := node.New(ctx, append(base, opts...)...)
	if err != nil {
		return nil, err
	}
	p := &swarmPeer{idx: idx, n: n, bw: bw}
	if p.ep, err = endpoint.New(n); err != nil {
		p.close()
		return nil, err
	}
	if p.ps, err = pipe.New(p.ep); err != nil {
		p.close()
		return nil, err
	}
	s.mu.Lock()
	for len(s.peers) <= idx {
		s.peers = append(s.peers, nil)
	}
	s.peers[idx] = p
	s.mu.Unlock()
	return p, nil
}

// remove takes p out of the swarm; the caller closes it.
func (s *swarm) remove(p *swarmPeer) {
	s.mu.Lock()
	s.peers[p.idx] = nil
	s.mu.Unlock()
}

// build starts n peers, one after the other, then fills every DHT's
// routing table.
func (s *swarm) build(ctx context.Context, n int, opts ...node.Option) error {
	for i := range n {
		if _, err := s.join(ctx, opts...); err != nil {
			return fmt.Errorf("peer %d: %w", i, err)
		}
	}
	return s.refresh(ctx)
}

// refresh fills the DHTs' routing tables from the peers they know, a few
// at a time.
func (s *swarm) refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	peers := s.alive()
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, p := range peers {
		if p.n.Routing() == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			p.n.RefreshRouting(ctx) // best effort: a table a few peers short still routes
		}()
	}
	wg.Wait()
	return ctx.Err()
}

func (s *swarm) close() {
	peers := s.alive()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, p := range peers {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s.remove(p)
			p.close()
		}()
	}
	wg.Wait()
}

// bytesOut sums what the given peers wrote on their streams. libp2p's
// bandwidth counters update their totals once a second: it waits for the
// next update first.
func bytesOut(ctx context.Context, peers []*swarmPeer) int64 {
	sleepCtx(ctx, 1100*time.Millisecond)
	var n int64
	for _, p := range peers {
		n += p.bw.GetBandwidthTotals().TotalOut
	}
	return n
}

// cost fills r's per-peer cost from the process now.
func (s *swarm) cost(r *Result) {
	peers := s.alive()
	if len(peers) == 0 {
		return
	}
	now := measureUsage()
	conns := 0
	for _, p := range peers {
		conns += len(p.n.Host().Network().Conns())
		st := p.ps.Stats()
		r.GossipDropped += st.PropagateOutboundDropped + st.PropagateInboundDropped + st.PropagateUndelivered
	}
	r.RSSPerPeer = max(0, now.rss-s.base.rss) / int64(len(peers))
	r.PSSPerPeer = max(0, now.pss-s.base.pss) / int64(len(peers))
	r.GoroutinesPerPeer = float64(now.goroutines-s.base.goroutines) / float64(len(peers))
	r.ConnsPerPeer = float64(conns) / float64(len(peers))
}

// Swarm messages start with a header: when the message was handed over
// (Unix ns), the sending peer, a sequence number and the kind.
const swarmHeader = 20

const (
	kindData    = 0 // propagate
	kindProbe   = 1 // propagate, before the run
	kindUnicast = 2
)

func swarmPayload(size, from, seq, kind int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b, uint64(time.Now().UnixNano()))
	binary.BigEndian.PutUint32(b[8:], uint32(from))
	binary.BigEndian.PutUint32(b[12:], uint32(seq))
	binary.BigEndian.PutUint32(b[16:], uint32(kind))
	return b
}

type swarmMsg struct {
	kind, from, seq int
}

// MarshalJSON writes m as [kind, from, seq], for peers that share lists
// of messages (RunPeer).
func (m swarmMsg) MarshalJSON() ([]byte, error) { return json.Marshal([3]int{m.kind, m.from, m.seq}) }

// UnmarshalJSON reads what MarshalJSON wrote.
func (m *swarmMsg) UnmarshalJSON(b []byte) error {
	var v [3]int
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	m.kind, m.from, m.seq = v[0], v[1], v[2]
	return nil
}

// swarmRecorder records deliveries: per receiving peer, the messages it
// got, with their latency.
type swarmRecorder struct {
	mu     sync.Mutex
	got    map[int]map[swarmMsg]int   // receiver -> message -> copies
	probes map[int]map[int]bool       // receiver -> probing publisher
	lat    map[[2]int][]time.Duration // (receiver, kind) -> first deliveries' latencies
	first  map[[2]int]time.Time       // (receiver, from): first unicast delivery
}

func newSwarmRecorder() *swarmRecorder {
	return &swarmRecorder{got: map[int]map[swarmMsg]int{}, probes: map[int]map[int]bool{}, lat: map[[2]int][]time.Duration{}, first: map[[2]int]time.Time{}}
}

// deliver records payload b arriving at peer to.
func (r *swarmRecorder) deliver(to int, b []byte) {
	now := time.Now()
	if len(b) < swarmHeader {
		return
	}
	sent := time.Unix(0, int64(binary.BigEndian.Uint64(b)))
	kind := int(binary.BigEndian.Uint32(b[16:]))
	m := swarmMsg{kind: kind, from: int(binary.BigEndian.Uint32(b[8:])), seq: int(binary.BigEndian.Uint32(b[12:]))}
	r.mu.Lock()
	defer r.mu.Unlock()
	if kind == kindProbe {
		if r.probes[to] == nil {
			r.probes[to] = map[int]bool{}
		}
		r.probes[to][m.from] = true
		return
	}
	g := r.got[to]
	if g == nil {
		g = map[swarmMsg]int{}
		r.got[to] = g
	}
	g[m]++
	if g[m] == 1 {
		k := [2]int{to, kind}
		r.lat[k] = append(r.lat[k], now.Sub(sent))
		if _, ok := r.first[[2]int{to, m.from}]; !ok && kind == kindUnicast {
			r.first[[2]int{to, m.from}] = now
		}
	}
}

// probed reports whether peer to has had a probe from every publisher.
func (r *swarmRecorder) probed(to int, publishers []int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range publishers {
		if !r.probes[to][p] {
			return false
		}
	}
	return true
}

// unicastAt returns the unicast messages peer to got and, by sender, when
// the first of each sender's arrived.
func (r *swarmRecorder) unicastAt(to int) ([]swarmMsg, map[int]time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var msgs []swarmMsg
	for m := range r.got[to] {
		if m.kind == kindUnicast {
			msgs = append(msgs, m)
		}
	}
	first := map[int]time.Time{}
	for k, t := range r.first {
		if k[0] == to {
			first[k[1]] = t
		}
	}
	return msgs, first
}

// has reports whether peer to got message m.
func (r *swarmRecorder) has(to int, m swarmMsg) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[to][m] > 0
}

// tally counts, over the receivers, the deliveries of msgs, all of one
// kind (every receiver expects each of them), and fills r.
func (r *swarmRecorder) tally(res *Result, receivers []int, kind int, msgs []swarmMsg) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res.Expected += len(receivers) * len(msgs)
	res.MinMemberShare = 1
	for _, to := range receivers {
		got := 0
		for _, m := range msgs {
			switch c := r.got[to][m]; {
			case c > 0:
				got++
				res.Duplicates += c - 1
			}
		}
		res.Delivered += got
		if len(msgs) > 0 {
			res.MinMemberShare = min(res.MinMemberShare, float64(got)/float64(len(msgs)))
		}
		res.Latencies = append(res.Latencies, r.lat[[2]int{to, kind}]...)
	}
	fillLatency(res)
}

func fillLatency(res *Result) {
	if len(res.Latencies) == 0 {
		return
	}
	slices.Sort(res.Latencies)
	res.P50 = int64(quantileD(res.Latencies, 0.5))
	res.P99 = int64(quantileD(res.Latencies, 0.99))
	res.Max = int64(res.Latencies[len(res.Latencies)-1])
}

// quantileD is the q-quantile of sorted v (nearest rank).
func quantileD(v []time.Duration, q float64) time.Duration {
	if len(v) == 0 {
		return 0
	}
	i := int(q*float64(len(v))+0.999999) - 1
	return v[min(max(i, 0), len(v)-1)]
}

// handler records what a pipe bound on peer idx delivers. It runs where
// the pipe hands the message over, so a Flush that returned nil means the
// recorder has the message.
func (s *swarm) handler(idx int) pipe.InputOption {
	return pipe.WithHandler(func(r *pipe.Received) {
		if r.Message.Len() > 0 {
			s.rec.deliver(idx, r.Message.At(0).Data)
		}
	})
}

// waitFor polls cond every 20 ms until it holds or ctx ends.
func waitFor(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// ErrIncomplete is what Complete's errors unwrap to.
var ErrIncomplete = errors.New("swarm: case incomplete")

// Complete returns nil if the case delivered everything it expected with
// no failure and lost nothing without an error, else what fell short.
func (r Result) Complete() error {
	var short []string
	if r.Delivered < r.Expected {
		d := fmt.Sprintf("%d of %d delivered", r.Delivered, r.Expected)
		if r.Shortfall != "" {
			d += " (first short: " + r.Shortfall + ")"
		}
		short = append(short, d)
	}
	if r.Failures > 0 {
		f := english.Count(r.Failures, "failure", "failures")
		if r.FirstFailure != "" {
			f += " (first: " + r.FirstFailure + ")"
		}
		short = append(short, f)
	}
	if r.Lost > 0 {
		short = append(short, english.Count(r.Lost, "message", "messages")+" lost without an error")
	}
	if len(short) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s with %d peers: %s", ErrIncomplete, r.Case, r.Peers, strings.Join(short, ", "))
}

// runInProcess runs one case with every peer a RunPeer in this
// process, and measures the process's cost per peer.
func runInProcess(ctx context.Context, cfg Config) (Result, error) {
	present := cfg.Peers
	if cfg.Cases[0] == Churn {
		cfg.Peers += max(1, int(math.Round(cfg.ChurnFraction*float64(present)))) // the joiners
	}
	debug.FreeOSMemory() // what earlier swarms left is not this one's
	base := measureUsage()
	cfg.base = &base
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hub := newMemHub(cfg.Peers)
	var (
		mu     sync.Mutex
		first  *Result
		cause  error // the first peer's error; the others' follow from the cancel it caused
		others int
		wg     sync.WaitGroup
	)
	for seq := 1; seq <= cfg.Peers; seq++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := RunPeer(ctx, cfg, hub.coordinator(seq), "/ip4/127.0.0.1/tcp/0")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if cause == nil {
					cause = fmt.Errorf("peer %d: %w", seq, err)
				} else {
					others++
				}
				cancel() // the others would wait for it at the next rendezvous
			}
			if seq == 1 {
				first = r
			}
		}()
	}
	wg.Wait()
	if cause != nil {
		if others > 0 {
			return Result{}, fmt.Errorf("%w (and %d more peers stopped with it)", cause, others)
		}
		return Result{}, cause
	}
	if first == nil {
		return Result{}, errors.New("swarm: peer 1 returned no result")
	}
	first.Peers = present
	return *first, nil
}
