// Package pathinfo tells the adaptive encoding scheme what it cannot see
// from the encoding layer: the path to a peer (RTT, bandwidth, slow start)
// and the peer's decode profile. A Monitor per peer measures the RTT with
// libp2p pings, probes the bandwidth, refines it from the exchanges the
// scheme reports (adaptive.Peer's ObserveExchange) and fetches the peer's
// profile, over a small protocol, /p2pmsg/pathinfo/2.0.0, by which peers
// probe each other and exchange decode profiles (as NAM's client sent its
// decompression model).
//
// It sits above pkg/node and pkg/encoding/adaptive, beside the endpoint
// layer: it imports no endpoint, pipe or socket code, and the encoding
// layer imports none of it (a *Monitor is an adaptive.Peer).
//
// # The protocol
//
// One request per stream; the first byte names it.
//
//	probe    1, uvarint size (at most MaxProbe), uvarint gap (ns), size bytes
//	         → uvarint length, then uvarint received, uvarint first read,
//	           uvarint span (ns), uvarint bursts (at most 64), per burst
//	           uvarint bytes, start (ns), duration (ns)
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
	msmux "github.com/multiformats/go-multistream"

	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
)

// ProtocolID is the pathinfo protocol. Version 2 carries the adaptive
// profile's JSON form; a peer of version 1 is one without the protocol.
const ProtocolID protocol.ID = "/p2pmsg/pathinfo/2.0.0"

// ErrBadOption reports an option out of its bounds.
var ErrBadOption = errors.New("pathinfo: invalid option")

// requestTimeout bounds how long the server side of one request may take
// beyond the probe's own transfer: far beyond any round trip, short
// enough that a stalled peer does not hold a stream for long.
const requestTimeout = 30 * time.Second

// Option configures a Service.
type Option func(*config) error

type config struct {
	maxProbe int
}

// WithMaxProbe bounds the largest probe train this node sends, 4 KiB to
// MaxProbe. Default MaxProbe.
func WithMaxProbe(n int) Option {
	return func(c *config) error {
		if n < firstProbe || n > MaxProbe {
			return fmt.Errorf("%w: max probe %d", ErrBadOption, n)
		}
		c.maxProbe = n
		return nil
	}
}

// Service answers other peers' probes and profile requests and keeps one
// Monitor per peer this node sends to.
type Service struct {
	host   host.Host
	models *adaptive.Models
	cfg    config

	mu       sync.Mutex
	monitors map[peer.ID]*Monitor
}

// New starts the service on the libp2p host h (a p2pmsg node's Host()):
// it answers /p2pmsg/pathinfo/2.0.0, serving models' decode profile
// (what the node's timed decodes taught them: adaptive.Models.TimeDecodes
// and CalibrateDecode).
func New(h host.Host, models *adaptive.Models, opts ...Option) (*Service, error) {
	if h == nil || models == nil {
		return nil, fmt.Errorf("%w: nil host or models", ErrBadOption)
	}
	cfg := config{maxProbe: MaxProbe}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	s := &Service{host: h, models: models, cfg: cfg, monitors: make(map[peer.ID]*Monitor)}
	h.SetStreamHandler(ProtocolID, s.handle)
	return s, nil
}

// Close stops answering probes and profile requests.
func (s *Service) Close() error {
	s.host.RemoveStreamHandler(ProtocolID)
	return nil
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
	if op == opProfile {
		b, err := s.models.Profile().MarshalBinary()
		if err != nil {
			st.Reset()
			return
		}
		st.Write(appendFrame(nil, b))
		return
	}
	// Allow the train its time at a dial-up's 4 KB/s on top.
	st.SetDeadline(time.Now().Add(requestTimeout + time.Duration(h.Size)*250*time.Microsecond))
	rec := recorder{gap: max(h.Gap, time.Millisecond)}
	buf := make([]byte, 64<<10)
	for left := h.Size; left > 0; {
		n, err := r.Read(buf[:min(left, len(buf))])
		if n > 0 {
			rec.read(n, time.Now())
			left -= n
		}
		if err != nil {
			st.Reset()
			return
		}
	}
	st.Write(appendFrame(nil, appendReport(nil, rec.rep)))
}

// Monitor returns the monitor of the path to p, creating it (with what
// the models remember of p) on first use.
func (s *Service) Monitor(p peer.ID) *Monitor {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.monitors[p]; m != nil {
		return m
	}
	m := &Monitor{svc: s, peer: p}
	s.monitors[p] = m
	return m
}

// request opens a stream to p, writes req and body, and reads one frame
// back.
func (s *Service) request(ctx context.Context, p peer.ID, req []byte, body func(io.Writer) error, maxFrame int) ([]byte, error) {
	st, err := s.host.NewStream(ctx, p, ProtocolID)
	if err != nil {
		return nil, requestError(p, err)
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { st.Reset() })
	defer stop()
	_, err = st.Write(req)
	if err == nil && body != nil {
		err = body(st)
	}
	if err == nil {
		err = st.CloseWrite()
	}
	var b []byte
	if err == nil {
		b, err = readFrame(bufio.NewReader(st), maxFrame)
	}
	if err != nil {
		st.Reset()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, requestError(p, err)
	}
	return b, nil
}

// errUnsupported reports a peer that does not run pathinfo: not an error
// for Ensure, which then goes without.
var errUnsupported = errors.New("pathinfo: peer does not speak " + string(ProtocolID))

func requestError(p peer.ID, err error) error {
	if errors.Is(err, msmux.ErrNotSupported[protocol.ID]{}) {
		err = errUnsupported
	}
	return fmt.Errorf("pathinfo: %s: %w", p, err)
}
