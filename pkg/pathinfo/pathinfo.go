// Package pathinfo tells the adaptive encoding scheme what it cannot see
// from the encoding layer: the path to a peer (RTT, bandwidth, slow start)
// and the peer's decode profile. It observes a p2pmsg node's libp2p
// connections (libp2p pings, whose RTTs go into the peerstore's latency
// EWMA, and the transfers the application reports), probes a path
// explicitly when it has no history for it, and runs a small protocol,
// /p2pmsg/pathinfo/1.0.0, by which peers probe each other and exchange
// decode profiles (as NAM's client sent its decompression model).
//
// It sits above pkg/node and pkg/encoding/adaptive, beside the endpoint
// layer: it imports no endpoint, pipe or socket code, and the encoding
// layer imports none of it (a *Monitor is an adaptive.PathSource and an
// adaptive.ProfileSource).
//
// # The protocol
//
// One request per stream; the first byte names it.
//
//	probe    1, uvarint size (at most MaxProbe), uvarint gap (ns), size bytes
//	         → uvarint received, uvarint first read, uvarint span (ns),
//	           uvarint bursts (at most 64), per burst uvarint bytes,
//	           start (ns), duration (ns)
//	profile  2 → uvarint length, adaptive profile (at most
//	         adaptive.MaxProfileSize)
//
// The receiver of a probe times its reads and cuts them into bursts where
// a gap exceeds the requested one: the sender gets the bottleneck rate
// from the dispersion of the train, without synchronised clocks, and the
// initial window from the first burst when slow start splits the train.
package pathinfo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
)

// ProtocolID is the pathinfo protocol.
const ProtocolID protocol.ID = "/p2pmsg/pathinfo/1.0.0"

// ErrBadOption reports an option out of its bounds.
var ErrBadOption = errors.New("pathinfo: invalid option")

// requestTimeout bounds how long the server side of one request may take
// beyond the probe's own transfer.
const requestTimeout = 30 * time.Second

// Option configures a Service.
type Option func(*config) error

type config struct {
	reg      *encoding.Registry
	profile  func() *adaptive.Profile
	maxAge   time.Duration
	maxProbe int
	clock    adaptive.Clock
}

// WithRegistry sets the codecs this node decodes with, which it measures
// before serving its profile the first time so that the profile covers
// them. Default: encoding.Default().
func WithRegistry(r *encoding.Registry) Option {
	return func(c *config) error {
		if r == nil {
			return fmt.Errorf("%w: nil registry", ErrBadOption)
		}
		c.reg = r
		return nil
	}
}

// WithProfile replaces the profile this node serves. Default: its models'
// Profile, after measuring the registry's codecs it knows nothing of.
func WithProfile(f func() *adaptive.Profile) Option {
	return func(c *config) error {
		if f == nil {
			return fmt.Errorf("%w: nil profile function", ErrBadOption)
		}
		c.profile = f
		return nil
	}
}

// WithMaxAge sets how old a remembered path may be and still be used
// without a new probe (an RTT check still runs). 0 to 30 days; default
// one hour.
func WithMaxAge(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 || d > 30*24*time.Hour {
			return fmt.Errorf("%w: max age %v", ErrBadOption, d)
		}
		c.maxAge = d
		return nil
	}
}

// WithMaxProbe bounds the largest probe train this node sends, 4 KiB to
// MaxProbe. Default MaxProbe (4 MiB), which a gigabit link carries in
// 34 ms; slower links stop growing their trains long before.
func WithMaxProbe(n int) Option {
	return func(c *config) error {
		if n < 4<<10 || n > MaxProbe {
			return fmt.Errorf("%w: max probe %d", ErrBadOption, n)
		}
		c.maxProbe = n
		return nil
	}
}

// WithClock sets the clock probes are timed with. Default: the system
// clock.
func WithClock(cl adaptive.Clock) Option {
	return func(c *config) error {
		if cl == nil {
			return fmt.Errorf("%w: nil clock", ErrBadOption)
		}
		c.clock = cl
		return nil
	}
}

type sysClock struct{}

func (sysClock) Now() time.Time { return time.Now() }

// Service answers other peers' probes and profile requests and keeps one
// Monitor per peer this node sends to.
type Service struct {
	host   host.Host
	models *adaptive.Models
	cfg    config

	calibrate sync.Once

	mu       sync.Mutex
	monitors map[peer.ID]*Monitor
	closed   bool
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// New starts the service on the libp2p host h (a p2pmsg node's Host()):
// it answers /p2pmsg/pathinfo/1.0.0, and
// keeps what it learns of paths and profiles in models.
func New(h host.Host, models *adaptive.Models, opts ...Option) (*Service, error) {
	if h == nil || models == nil {
		return nil, fmt.Errorf("%w: nil host or models", ErrBadOption)
	}
	cfg := config{reg: encoding.Default(), maxAge: time.Hour, maxProbe: MaxProbe, clock: sysClock{}}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{host: h, models: models, cfg: cfg, monitors: make(map[peer.ID]*Monitor), ctx: ctx, cancel: cancel}
	h.SetStreamHandler(ProtocolID, s.handle)
	return s, nil
}

// Models returns the models the service keeps paths and profiles in.
func (s *Service) Models() *adaptive.Models { return s.models }

// Close stops answering, stops every monitor's watch and waits for it.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.host.RemoveStreamHandler(ProtocolID)
	s.cancel()
	s.wg.Wait()
	return nil
}

// Profile returns the profile this node serves.
func (s *Service) Profile() *adaptive.Profile {
	if s.cfg.profile != nil {
		return s.cfg.profile()
	}
	s.calibrate.Do(func() { s.models.CalibrateDecode(s.cfg.reg, s.cfg.clock) })
	return s.models.Profile()
}

func (s *Service) handle(st network.Stream) {
	defer st.Close()
	st.SetDeadline(time.Now().Add(requestTimeout))
	r := bufio.NewReaderSize(st, 64<<10)
	op, h, err := readRequest(r)
	if err != nil {
		st.Reset()
		return
	}
	switch op {
	case opProfile:
		b, err := s.Profile().MarshalBinary()
		if err != nil {
			st.Reset()
			return
		}
		st.Write(appendFrame(nil, b))
	case opProbe:
		// Allow the train its time at a dial-up's 4 KB/s on top.
		st.SetDeadline(time.Now().Add(requestTimeout + time.Duration(h.Size)*250*time.Microsecond))
		rec := recorder{gap: max(h.Gap, time.Millisecond)}
		buf := make([]byte, 64<<10)
		for left := h.Size; left > 0; {
			n, err := r.Read(buf[:min(left, len(buf))])
			if n > 0 {
				rec.read(n, s.cfg.clock.Now())
				left -= n
			}
			if err != nil {
				st.Reset()
				return
			}
		}
		st.Write(appendFrame(nil, appendReport(nil, rec.rep)))
	}
}

// Monitor returns the monitor of the path to p, creating it (with what
// the models remember of p) on first use.
func (s *Service) Monitor(p peer.ID) *Monitor {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.monitors[p]; m != nil {
		return m
	}
	m := newMonitor(s, p)
	s.monitors[p] = m
	return m
}

// request opens a stream to p, writes req and reads one frame back.
func (s *Service) request(ctx context.Context, p peer.ID, req []byte, body func(io.Writer) error, maxFrame int) ([]byte, error) {
	st, err := s.host.NewStream(ctx, p, ProtocolID)
	if err != nil {
		return nil, fmt.Errorf("pathinfo: %s: %w", p, err)
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { st.Reset() })
	defer stop()
	if _, err := st.Write(req); err != nil {
		st.Reset()
		return nil, fmt.Errorf("pathinfo: %s: %w", p, err)
	}
	if body != nil {
		if err := body(st); err != nil {
			st.Reset()
			return nil, fmt.Errorf("pathinfo: %s: %w", p, err)
		}
	}
	if err := st.CloseWrite(); err != nil {
		st.Reset()
		return nil, fmt.Errorf("pathinfo: %s: %w", p, err)
	}
	b, err := readFrame(bufio.NewReader(st), maxFrame)
	if err != nil {
		st.Reset()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("pathinfo: %s: %w", p, err)
	}
	return b, nil
}
