package lab

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
	yamux "github.com/libp2p/go-libp2p/p2p/muxer/yamux"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

// The layers of a rate study (RateConfig.Layers).
const (
	RateStream      = "stream"       // go-libp2p's stream, one Write per message
	RateStreamBufio = "stream-bufio" // go-libp2p's stream through a 64 KiB bufio.Writer
	RateEndpoint    = "endpoint"
	RatePipe        = "pipe"      // unicast pipe Send → Receive
	RatePropagate   = "propagate" // propagate pipe with Peers members
	RateSocket      = "socket"    // socket, one Write per message
)

// RateLayers are the layers `p2pmsg lab rate` knows, in its default order.
var RateLayers = []string{RateStream, RateStreamBufio, RateEndpoint, RatePipe, RatePropagate, RateSocket, RateNATS}

// DefaultRateSizes are the payload sizes of a rate study by default.
var DefaultRateSizes = []int{16, 100, 1 << 10, 16 << 10}

// RateShape is who sends to whom: Senders goroutines on one node, each
// sending to every one of Peers receiving nodes in turn.
type RateShape struct {
	Senders int `json:"senders"`
	Peers   int `json:"peers"`
}

// DefaultRateShapes are one sender to one peer, 8 concurrent senders to
// one peer and one sender to 8 peers.
var DefaultRateShapes = []RateShape{{1, 1}, {8, 1}, {1, 8}}

// RateConfig describes a rate study. Zero fields take the defaults.
type RateConfig struct {
	Layers    []string    // default RateLayers
	Sizes     []int       // payload sizes, at least 12 bytes; default DefaultRateSizes
	Shapes    []RateShape // default DefaultRateShapes
	Transport string      // TransportTCP (default) or TransportQUIC
	// Messages is how many messages a maximum-rate run sends (default
	// 200,000), fewer for large sizes: at most MaxBytes of payload.
	Messages int
	MaxBytes int64 // bounds each run's payload, the latency run's too; default 256 MiB
	// MaxTime bounds a maximum-rate run at the warm-up's rate (default
	// 3 s): a slow layer sends fewer than Messages.
	MaxTime time.Duration
	// WarmTime is how long each size's warm-up lasts at least (default
	// DefaultWarmTime; see rateCell).
	WarmTime time.Duration
	// LatencyTime is how long the latency run offers Load times the
	// measured maximum rate (default DefaultLatencyTime).
	LatencyTime time.Duration
	// Load is the fraction of the measured maximum rate the latency run
	// offers (default 0.5).
	Load float64
	// PaceStep is how often the latency run's pacer hands the senders
	// the messages that came due (DefaultPaceStep if 0; negative: as
	// often as it can, yielding between hand-outs). It must be shorter
	// than LatencyTime: a step as long hands out every message but the
	// first at once, which paces nothing.
	PaceStep time.Duration
	// Stall ends a run whose receivers have received nothing more for
	// this long (default 5 s): the rest are counted lost.
	Stall    time.Duration
	Progress io.Writer
}

// DefaultPaceStep is how often the latency run's pacer hands out the
// messages that came due: Linux's default timer slack for a thread, the
// shortest a sleeping thread reliably sleeps. A pacer with finer steps
// cannot sleep between them at the rates measured here (a message is due
// every microsecond or less): it yields in a loop and hands out a few
// messages at a time, so the layer under test writes per few messages and
// keeps every P of the process busy, and Go polls the network only from a
// P with nothing else to run, or every 10 ms (golang/go#51651): the
// receiving connection's reader is woken late, and the latency measured
// is the runtime's, at a load that saturates (docs/performance.md).
const DefaultPaceStep = 50 * time.Microsecond

// RateResult is one layer, size and shape. MsgsPerS is what the receivers
// handed over per second while the senders sent as fast as they could
// (for propagate, copies handed over per second over the members: a
// message some of whose copies were lost counts for those that arrived);
// P50 and P99 are the latency from the Send call to the
// receiver's handler while the senders offered half that rate, evenly
// paced (Offered).
type RateResult struct {
	Layer string `json:"layer"`
	// Transport is what the layer ran on: the study's libp2p transport,
	// or tcp for nats, which runs on plain TCP whatever the study's.
	Transport string        `json:"transport"`
	Size      int           `json:"size"`
	Senders   int           `json:"senders"`
	Peers     int           `json:"peers"`
	Messages  int           `json:"messages"`
	MsgsPerS  float64       `json:"msgs_per_s"`
	BytesPerS float64       `json:"bytes_per_s"`
	P50       time.Duration `json:"p50_ns"`
	P99       time.Duration `json:"p99_ns"`
	Offered   float64       `json:"offered_msgs_per_s"`
	// Lost counts messages (or, for propagate, copies) that had not
	// arrived when a run stalled, in both runs.
	Lost int64 `json:"lost,omitempty"`
}

// RunRate runs the study, layer by layer, shape by shape, size by size.
// Each layer and shape runs on nodes of its own, set up once for all
// sizes and warmed up with each size.
func RunRate(ctx context.Context, cfg RateConfig) ([]RateResult, error) {
	layers := cfg.Layers
	if len(layers) == 0 {
		layers = RateLayers
	}
	sizes := cfg.Sizes
	if len(sizes) == 0 {
		sizes = DefaultRateSizes
	}
	shapes := cfg.Shapes
	if len(shapes) == 0 {
		shapes = DefaultRateShapes
	}
	for _, l := range layers {
		if !slices.Contains(RateLayers, l) {
			return nil, fmt.Errorf("%w: %q (have %s)", ErrUnknownLayer, l, strings.Join(RateLayers, ", "))
		}
	}
	for _, s := range sizes {
		if s < 12 || s > 16<<20 {
			return nil, fmt.Errorf("%w: size %d: want 12 bytes (a timestamp and a pass number) to 16 MiB", ErrRateConfig, s)
		}
	}
	for _, sh := range shapes {
		if sh.Senders < 1 || sh.Peers < 1 || sh.Senders > 256 || sh.Peers > 64 {
			return nil, fmt.Errorf("%w: shape %d senders to %d peers: want 1–256 senders and 1–64 peers", ErrRateConfig, sh.Senders, sh.Peers)
		}
	}
	if lt := latencyTime(cfg); cfg.PaceStep >= lt {
		return nil, fmt.Errorf("%w: pace step %v: want less than the latency run's %v", ErrRateConfig, cfg.PaceStep, lt)
	}
	transport := cmp(cfg.Transport, TransportTCP)
	if err := CheckTransport(transport); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRateConfig, err)
	}
	var out []RateResult
	for _, layer := range layers {
		for _, sh := range shapes {
			res, err := runRateRig(ctx, cfg, transport, layer, sh, sizes)
			if err != nil {
				return nil, fmt.Errorf("lab: rate %s, %d senders to %d peers: %w", layer, sh.Senders, sh.Peers, err)
			}
			out = append(out, res...)
		}
	}
	return out, nil
}

func runRateRig(ctx context.Context, cfg RateConfig, transport, layer string, sh RateShape, sizes []int) ([]RateResult, error) {
	sink := &rateSink{}
	rig, err := openRateRig(ctx, transport, layer, sh, sink)
	if err != nil {
		return nil, err
	}
	defer rig.close()
	var out []RateResult
	for _, size := range sizes {
		r, err := rateCell(ctx, cfg, rig, sink, sh, size)
		if err != nil {
			return nil, fmt.Errorf("size %d: %w", size, err)
		}
		r.Layer, r.Transport = layer, transport
		if layer == RateNATS {
			r.Transport = TransportTCP
		}
		out = append(out, r)
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "lab rate: %s %s %d→%d: %.0f msg/s, p50 %v p99 %v\n",
				layer, FormatSize(size), sh.Senders, sh.Peers, r.MsgsPerS, r.P50, r.P99)
		}
	}
	return out, nil
}

// rateCell measures one size: a warm-up, a run at the maximum rate, and
// a run at half of it for the latency.
//
// The warm-up lasts WarmTime at least, at the layer's rate: long enough
// for the stream's flow-control windows (yamux grows them with use) and
// the garbage collector's pacing to reach what they are in steady use,
// which a pass of a few milliseconds does not, so that a cell measures
// the layer, not what ran before it in the process.
func rateCell(ctx context.Context, cfg RateConfig, rig rateRig, sink *rateSink, sh RateShape, size int) (RateResult, error) {
	n := cmpInt(cfg.Messages, 200_000)
	maxBytes := cfg.MaxBytes
	if maxBytes <= 0 {
		maxBytes = 256 << 20
	}
	n = max(min(n, int(maxBytes/int64(size))), 100*sh.Senders*sh.Peers)
	n -= n % (sh.Senders * sh.Peers)
	stall := cfg.Stall
	if stall <= 0 {
		stall = 5 * time.Second
	}
	res := RateResult{Size: size, Senders: sh.Senders, Peers: sh.Peers, Messages: n}
	copies := rig.copies()

	warm := max(n/10, sh.Senders*sh.Peers)
	warm -= warm % (sh.Senders * sh.Peers)
	wt, _, _, err := ratePass(ctx, rig, sink, sh, size, warm, copies, 0, 0, stall)
	if err != nil {
		return res, fmt.Errorf("warm-up: %w", err)
	}
	warmTime := cfg.WarmTime
	if warmTime <= 0 {
		warmTime = DefaultWarmTime
	}
	if wt > 0 && wt < warmTime {
		// The rest of warmTime, at the first pass's rate.
		more := min(int(float64(warm)*float64(warmTime-wt)/float64(wt)), int(maxBytes/int64(size)))
		more -= more % (sh.Senders * sh.Peers)
		if more > 0 {
			if _, _, _, err := ratePass(ctx, rig, sink, sh, size, more, copies, 0, 0, stall); err != nil {
				return res, fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	// A run lasts about MaxTime at the warm-up's rate: slow layers
	// (propagate signs every message) send fewer.
	maxTime := cfg.MaxTime
	if maxTime <= 0 {
		maxTime = 3 * time.Second
	}
	if wt > 0 {
		n = min(n, max(int(float64(warm)/wt.Seconds()*maxTime.Seconds()), 100*sh.Senders*sh.Peers))
		n -= n % (sh.Senders * sh.Peers)
		res.Messages = n
	}
	elapsed, lost, _, err := ratePass(ctx, rig, sink, sh, size, n, copies, 0, 0, stall)
	if err != nil {
		return res, err
	}
	res.Lost += lost
	res.MsgsPerS = arrivedRate(n, copies, lost, elapsed)
	res.BytesPerS = res.MsgsPerS * float64(size)

	load := cfg.Load
	if !(load > 0 && load <= 1) { // NaN too
		load = 0.5
	}
	res.Offered = res.MsgsPerS * load
	lt := latencyTime(cfg)
	ln := int(res.Offered * lt.Seconds())
	ln = max(min(ln, int(maxBytes/int64(size))), sh.Senders*sh.Peers)
	ln -= ln % (sh.Senders * sh.Peers)
	step := cfg.PaceStep
	if step == 0 {
		step = DefaultPaceStep
	}
	_, lost, lat, err := ratePass(ctx, rig, sink, sh, size, ln, copies, res.Offered, max(step, 0), stall)
	if err != nil {
		return res, fmt.Errorf("latency run: %w", err)
	}
	res.Lost += lost
	slices.Sort(lat)
	if len(lat) > 0 {
		res.P50 = time.Duration(lat[len(lat)/2])
		res.P99 = time.Duration(lat[min(len(lat)-1, len(lat)*99/100)])
	}
	return res, nil
}

// arrivedRate is a run's rate: of its n messages of copies copies each,
// what arrived per second. A run that stalled with lost copies counts
// only those handed over (a message some of whose copies were lost counts
// for the share that arrived): before, it counted every message sent, so
// a propagate run that lost most of its copies reported a rate it never
// delivered.
func arrivedRate(n, copies int, lost int64, elapsed time.Duration) float64 {
	return (float64(n) - float64(lost)/float64(copies)) / elapsed.Seconds()
}

// DefaultWarmTime is the shortest warm-up of a cell (see rateCell), little
// beside the second of its latency run.
const DefaultWarmTime = 250 * time.Millisecond

// DefaultLatencyTime is how long the latency run offers its load unless
// RateConfig.LatencyTime says otherwise: long enough for a p99 of
// thousands of messages at the rates measured, short enough that a study
// of every layer, size and shape stays within minutes.
const DefaultLatencyTime = time.Second

// latencyTime is how long cfg's latency run offers its load.
func latencyTime(cfg RateConfig) time.Duration {
	if cfg.LatencyTime <= 0 {
		return DefaultLatencyTime
	}
	return cfg.LatencyTime
}

// ratePass sends n messages of size bytes from sh.Senders goroutines, as
// fast as they can (rate 0) or paced to rate messages per second in all,
// handed out every step, and waits until every copy has arrived or
// arrivals stall. It returns the time from the first Send to the last
// arrival, how many copies did not arrive, and, for a paced pass, the
// latencies of those that did.
func ratePass(ctx context.Context, rig rateRig, sink *rateSink, sh RateShape, size, n, copies int, rate float64, step, stall time.Duration) (time.Duration, int64, []int64, error) {
	ps := sink.start(int64(n*copies), rate > 0)
	defer sink.cur.Store(nil)
	per := n / sh.Senders
	// A paced pass has one pacer, which hands the senders tickets for
	// the messages that have come due since it last handed any, at most
	// once a step: one thread asleep (see pace), however many senders,
	// and no wake-up per message. It stops when ctx ends, within a step
	// or the wait for the next message due (the senders wait on it, not
	// on ctx).
	var tickets chan int
	stopPacer := make(chan struct{})
	var wg sync.WaitGroup
	if rate > 0 {
		tickets = make(chan int, sh.Senders)
		total := per * sh.Senders
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(tickets)
			start := time.Now()
			var handed time.Time // none yet: the first message goes at once
			for given := 0; given < total && ctx.Err() == nil; {
				due := min(int(time.Since(start).Seconds()*rate)+1, total)
				if due <= given || time.Since(handed) < step {
					next := start.Add(time.Duration(float64(given) / rate * float64(time.Second)))
					if h := handed.Add(step); next.Before(h) {
						next = h
					}
					pace(next)
					continue
				}
				select {
				case tickets <- due - given:
					given, handed = due, time.Now()
				case <-stopPacer:
					return
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	var sending sync.WaitGroup
	errs := make([]error, sh.Senders)
	for g := range sh.Senders {
		sending.Add(1)
		go func() {
			defer sending.Done()
			errs[g] = rateSender(ctx, rig, ps, g, sh.Peers, size, per, tickets)
		}()
	}
	sending.Wait()
	close(stopPacer)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, 0, nil, err
	}
	// Wait for the last copy, or until nothing arrives for stall.
	last, lastAt := ps.got.Load(), time.Now()
	for {
		select {
		case <-ps.done:
			return ps.end.Sub(ps.epoch), 0, ps.lat, nil
		case <-ctx.Done():
			return 0, 0, nil, ctx.Err()
		case <-time.After(stall / 10):
		}
		if got := ps.got.Load(); got != last {
			last, lastAt = got, time.Now()
		} else if time.Since(lastAt) > stall {
			sink.cur.Store(nil)
			lat := make([]int64, min(len(ps.lat), int(got)))
			for i := range lat {
				lat[i] = atomic.LoadInt64(&ps.lat[i])
			}
			return time.Since(ps.epoch) - stall, ps.want - got, lat, nil
		}
	}
}

// rateSender is one sending goroutine: per messages to peers in turn,
// each stamped with its send time when latencies are taken.
func rateSender(ctx context.Context, rig rateRig, ps *ratePassState, g, peers, size, per int, tickets chan int) error {
	send, err := rig.sender(g)
	if err != nil {
		return err
	}
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i*31 + 7)
	}
	binary.LittleEndian.PutUint32(payload[8:], ps.id)
	if tickets != nil {
		// Paced: as many messages as the tickets say, each stamped.
		i := 0
		for k := range tickets {
			for range k {
				binary.LittleEndian.PutUint64(payload, uint64(time.Since(ps.epoch)))
				if err := send.send(ctx, i%peers, payload); err != nil {
					return err
				}
				i++
			}
			if len(tickets) == 0 { // nothing due: write out what is buffered
				if err := send.idle(); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for i := range per {
		if err := send.send(ctx, i%peers, payload); err != nil {
			return err
		}
	}
	return send.idle()
}

// rateSink counts what the receivers hand over to the pass in progress.
// Each message names its pass (bytes 8 to 11), so a straggler from an
// earlier pass is not counted in a later one.
type rateSink struct {
	cur    atomic.Pointer[ratePassState]
	passes uint32
}

// ratePassState is one pass: what is expected and what arrived, and in a
// paced pass each message's latency from the stamp its sender put in it
// (bytes 0 to 7, since epoch).
type ratePassState struct {
	id   uint32
	want int64
	got  atomic.Int64 // arrivals, each taking a latency slot
	// filled counts arrivals whose latency is stored.
	filled atomic.Int64
	timed  bool
	epoch  time.Time
	lat    []int64
	done   chan struct{}
	end    time.Time // of the last arrival, once done is closed
}

func (s *rateSink) start(want int64, timed bool) *ratePassState {
	s.passes++
	ps := &ratePassState{id: s.passes, want: want, timed: timed, done: make(chan struct{})}
	if timed {
		ps.lat = make([]int64, want)
	}
	ps.epoch = time.Now()
	s.cur.Store(ps)
	return ps
}

// deliver is called by the receivers for each message's payload.
func (s *rateSink) deliver(p []byte) {
	ps := s.cur.Load()
	if ps == nil || len(p) < 12 || binary.LittleEndian.Uint32(p[8:]) != ps.id {
		return // between passes, or a straggler
	}
	var now time.Duration
	if ps.timed {
		now = time.Since(ps.epoch)
	}
	i := ps.got.Add(1)
	if ps.timed && i <= int64(len(ps.lat)) {
		// Atomic: a pass that stalls reads them while stragglers arrive.
		atomic.StoreInt64(&ps.lat[i-1], int64(now)-int64(binary.LittleEndian.Uint64(p)))
	}
	// Done once every slot is filled, not merely taken.
	if ps.filled.Add(1) == ps.want {
		ps.end = time.Now()
		close(ps.done)
	}
}

// rateRig is one layer's sending node and receiving nodes.
type rateRig interface {
	// sender returns what sending goroutine g sends with.
	sender(g int) (rateSend, error)
	// copies is how many copies of a message arrive (1, or the members
	// of a propagate pipe).
	copies() int
	close() error
}

// rateSend sends payloads to peers; payload may be reused once send
// returns. idle is called before the goroutine waits, so buffering
// layers write out what they hold.
type rateSend interface {
	send(ctx context.Context, peer int, payload []byte) error
	idle() error
}

func openRateRig(ctx context.Context, transport, layer string, sh RateShape, sink *rateSink) (rateRig, error) {
	if layer == RateNATS {
		return openNATSRig(sh.Peers, sink)
	}
	r := &nodeRig{layer: layer, sink: sink, peers: sh.Peers}
	if err := r.open(ctx, transport); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// RateProtocol is the libp2p protocol of the raw-stream layers of a rate
// study.
const RateProtocol protocol.ID = "/p2pmsg/lab/rate/1.0.0"

// nodeRig runs every rate layer: one sending node and peers receiving
// nodes, with the services the layer needs.
type nodeRig struct {
	layer string
	sink  *rateSink
	peers int

	a   *node.Node
	bs  []*node.Node
	eps []*endpoint.Service // [0] is the sender's
	ps  []*pipe.Service
	ss  []*socket.Service

	advs []*adv.PipeAdvertisement // per peer (propagate: one)
	ins  []*pipe.InputPipe
	lns  []*socket.Listener

	mu      sync.Mutex
	outs    []*pipe.OutputPipe  // per peer (propagate: one)
	streams []*rateStream       // per peer
	sockets map[int]*socketSend // per sender
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	conns   []io.Closer
}

func (r *nodeRig) copies() int {
	if r.layer == RatePropagate {
		return r.peers
	}
	return 1
}

func (r *nodeRig) open(ctx context.Context, transport string) error {
	r.ctx, r.cancel = context.WithCancel(context.Background())
	var opts []node.Option
	if r.layer == RateStream || r.layer == RateStreamBufio {
		// The baselines are go-libp2p's streams as it makes them: its
		// yamux, without the node's write coalescing.
		opts = append(opts, node.WithLibp2pOptions(libp2p.Muxer(yamux.ID, yamux.DefaultTransport)))
	}
	var err error
	if r.a, err = NewNode(ctx, transport, opts...); err != nil {
		return err
	}
	for range r.peers {
		b, err := NewNode(ctx, transport, opts...)
		if err != nil {
			return err
		}
		r.bs = append(r.bs, b)
		if err := r.a.Connect(ctx, b.AddrInfo()); err != nil {
			return err
		}
	}
	switch r.layer {
	case RateStream, RateStreamBufio:
		for _, b := range r.bs {
			b.Host().SetStreamHandler(RateProtocol, r.readFramed)
		}
		return nil
	}
	for _, n := range append([]*node.Node{r.a}, r.bs...) {
		ep, err := endpoint.New(n)
		if err != nil {
			return err
		}
		r.eps = append(r.eps, ep)
	}
	if r.layer == RateEndpoint {
		for _, ep := range r.eps[1:] {
			if err := ep.Register("lab-rate", "", endpoint.ListenerFunc(func(_ context.Context, d *endpoint.Delivery) {
				r.sink.deliver(d.Message.At(0).Data)
				d.Release()
			})); err != nil {
				return err
			}
		}
		return nil
	}
	for _, ep := range r.eps {
		ps, err := pipe.New(ep)
		if err != nil {
			return err
		}
		r.ps = append(r.ps, ps)
	}
	switch r.layer {
	case RatePipe:
		for _, ps := range r.ps[1:] {
			a, err := adv.New(adv.Unicast, "lab-rate", "")
			if err != nil {
				return err
			}
			in, err := ps.NewInputPipe(a)
			if err != nil {
				return err
			}
			r.advs, r.ins = append(r.advs, a), append(r.ins, in)
			r.wg.Add(1)
			go r.receivePipe(in)
		}
		for i, a := range r.advs {
			out, err := r.ps[0].NewOutputPipe(ctx, a, pipe.ToPeers(r.bs[i].AddrInfo()))
			if err != nil {
				return err
			}
			r.outs = append(r.outs, out)
		}
	case RatePropagate:
		a, err := adv.New(adv.Propagate, "lab-rate", "")
		if err != nil {
			return err
		}
		r.advs = []*adv.PipeAdvertisement{a}
		for _, ps := range r.ps[1:] {
			in, err := ps.NewInputPipe(a)
			if err != nil {
				return err
			}
			r.ins = append(r.ins, in)
			r.wg.Add(1)
			go r.receivePipe(in)
		}
		out, err := r.ps[0].NewOutputPipe(ctx, a)
		if err != nil {
			return err
		}
		r.outs = []*pipe.OutputPipe{out}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := out.WaitMembers(wctx, r.peers); err != nil {
			return err
		}
	case RateSocket:
		for _, ps := range r.ps {
			ss, err := socket.New(ps)
			if err != nil {
				return err
			}
			r.ss = append(r.ss, ss)
		}
		for _, ss := range r.ss[1:] {
			a, err := adv.New(adv.Unicast, "lab-rate", "")
			if err != nil {
				return err
			}
			l, err := ss.Listen(a)
			if err != nil {
				return err
			}
			r.advs, r.lns = append(r.advs, a), append(r.lns, l)
			r.wg.Add(1)
			go r.acceptSockets(l)
		}
	}
	return nil
}

// readFramed is the raw-stream receiver: 4-byte length, payload.
func (r *nodeRig) readFramed(st network.Stream) {
	r.wg.Add(1)
	defer r.wg.Done()
	defer st.Close()
	if r.readFrames(st) != nil {
		st.Reset()
	}
}

// readFrames hands the sink each frame read from rd until it ends.
func (r *nodeRig) readFrames(rd io.Reader) error {
	br := bufio.NewReaderSize(rd, 64<<10)
	var hdr [4]byte
	buf := make([]byte, 0, 1<<10)
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return nil
		}
		n := int(binary.BigEndian.Uint32(hdr[:]))
		if n > 16<<20 {
			return fmt.Errorf("lab: a frame of %d bytes", n)
		}
		buf = slices.Grow(buf[:0], n)[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil
		}
		r.sink.deliver(buf)
	}
}

func (r *nodeRig) receivePipe(in *pipe.InputPipe) {
	defer r.wg.Done()
	for {
		rcv, err := in.ReceiveFrom(r.ctx)
		if err != nil {
			return
		}
		r.sink.deliver(rcv.Message.At(0).Data)
		rcv.Release()
	}
}

func (r *nodeRig) acceptSockets(l *socket.Listener) {
	defer r.wg.Done()
	for {
		c, err := l.AcceptContext(r.ctx)
		if err != nil {
			return
		}
		r.mu.Lock()
		r.conns = append(r.conns, c)
		r.mu.Unlock()
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer c.Close()
			r.readFrames(c)
		}()
	}
}

func (r *nodeRig) close() error {
	if r.cancel != nil {
		r.cancel()
	}
	var errs []error
	r.mu.Lock()
	for _, c := range r.conns {
		c.Close()
	}
	for _, s := range r.streams {
		if s != nil {
			s.st.Close()
		}
	}
	r.mu.Unlock()
	for _, o := range r.outs {
		errs = append(errs, o.Close())
	}
	for _, in := range r.ins {
		errs = append(errs, in.Close())
	}
	for _, l := range r.lns {
		errs = append(errs, l.Close())
	}
	for _, s := range r.ss {
		errs = append(errs, s.Close())
	}
	for _, p := range r.ps {
		errs = append(errs, p.Close())
	}
	for _, e := range r.eps {
		errs = append(errs, e.Close())
	}
	for _, n := range append([]*node.Node{r.a}, r.bs...) {
		if n != nil {
			errs = append(errs, n.Close())
		}
	}
	r.wg.Wait()
	return errors.Join(errs...)
}

func (r *nodeRig) sender(g int) (rateSend, error) {
	switch r.layer {
	case RateStream, RateStreamBufio:
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.streams == nil {
			r.streams = make([]*rateStream, r.peers)
			for i, b := range r.bs {
				st, err := r.a.Host().NewStream(r.ctx, b.ID(), RateProtocol)
				if err != nil {
					return nil, err
				}
				r.streams[i] = &rateStream{st: st, w: bufio.NewWriterSize(st, 64<<10)}
			}
		}
		return &streamSend{streams: r.streams, bufio: r.layer == RateStreamBufio}, nil
	case RateEndpoint:
		s := &endpointSend{ep: r.eps[0], el: message.Element{Name: "d"}}
		for _, b := range r.bs {
			s.dst = append(s.dst, endpoint.PeerAddress(b.ID(), "lab-rate", ""))
		}
		return s, nil
	case RatePipe, RatePropagate:
		return &pipeSend{outs: r.outs}, nil
	case RateSocket:
		// One connection per sender and peer, kept for the rig's life.
		r.mu.Lock()
		defer r.mu.Unlock()
		if s := r.sockets[g]; s != nil {
			return s, nil
		}
		s := &socketSend{}
		for i, a := range r.advs {
			c, err := r.ss[0].Dial(r.ctx, a, pipe.ToPeers(r.bs[i].AddrInfo()))
			if err != nil {
				return nil, err
			}
			r.conns = append(r.conns, c)
			s.conns = append(s.conns, c)
		}
		if r.sockets == nil {
			r.sockets = map[int]*socketSend{}
		}
		r.sockets[g] = s
		return s, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownLayer, r.layer)
}

// rateStream is a raw stream to one peer, shared by the senders.
type rateStream struct {
	mu sync.Mutex
	st network.Stream
	w  *bufio.Writer
}

type streamSend struct {
	streams []*rateStream
	bufio   bool
	frame   []byte
}

func (s *streamSend) send(_ context.Context, p int, payload []byte) error {
	rs := s.streams[p]
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(payload)))
	if s.bufio {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		rs.w.Write(hdr[:])
		_, err := rs.w.Write(payload)
		return err
	}
	s.frame = append(append(s.frame[:0], hdr[:]...), payload...)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	_, err := rs.st.Write(s.frame)
	return err
}

func (s *streamSend) idle() error {
	if !s.bufio {
		return nil
	}
	for _, rs := range s.streams {
		rs.mu.Lock()
		err := rs.w.Flush()
		rs.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

type endpointSend struct {
	ep  *endpoint.Service
	dst []endpoint.Address
	el  message.Element
	m   *message.Message
}

func (s *endpointSend) send(ctx context.Context, p int, payload []byte) error {
	if s.m == nil {
		s.el.Data = payload
		s.m = message.New(s.el)
	}
	return s.ep.Send(ctx, s.dst[p], s.m)
}

func (s *endpointSend) idle() error { return nil }

type pipeSend struct {
	outs []*pipe.OutputPipe
	m    *message.Message
}

func (s *pipeSend) send(ctx context.Context, p int, payload []byte) error {
	if s.m == nil {
		s.m = message.New(message.Element{Name: "d", Data: payload})
	}
	return s.outs[p%len(s.outs)].Send(ctx, s.m)
}

func (s *pipeSend) idle() error { return nil }

// socketSend writes each message, behind its 4-byte length, with one
// Write.
type socketSend struct {
	conns []*socket.Conn
	frame []byte
}

func (s *socketSend) send(_ context.Context, p int, payload []byte) error {
	s.frame = append(binary.BigEndian.AppendUint32(s.frame[:0], uint32(len(payload))), payload...)
	_, err := s.conns[p].Write(s.frame)
	return err
}

func (s *socketSend) idle() error { return nil }
