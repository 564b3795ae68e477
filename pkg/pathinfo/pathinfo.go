// Package pathinfo tells the adaptive encoding scheme what the encoding
// layer cannot see: the path to a peer (RTT, bandwidth, slow start) and the
// peer's decode profile. A Monitor per peer, when its Ensure is called,
// pings, probes the bandwidth and fetches the peer's profile (as NAM's
// client sent its decompression model) over a small protocol; it refines
// the path from the exchanges the scheme reports. It sits above pkg/node
// and pkg/encoding/adaptive, beside the endpoint layer, and imports no
// endpoint, pipe or socket code.
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
// The receiver of a probe times its reads and cuts them into bursts at gaps
// beyond the requested one: the sender reads the bottleneck rate from the
// train's dispersion, without synchronised clocks, and the initial window
// from the first burst.
package pathinfo

import (
	"bufio"
	"cmp"
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

// ErrBadOption reports a nil host or models.
var ErrBadOption = errors.New("pathinfo: invalid option")

// Serving probes. A probe is a measurement: one at a time per peer is all
// a sender needs, and maxProbing at once all a node serves (others are
// reset and counted). A sender grows a train fourfold only after the last
// took under maxTrainTime, so an honest one sends each probeWindow within
// progressTimeout, and all within requestTimeout, which is far beyond any
// round trip and short enough that a stalled peer holds little.
const (
	maxProbing      = 8
	probeWindow     = 64 << 10
	progressTimeout = 4*maxTrainTime + time.Second
	requestTimeout  = 30 * time.Second
)

// Service answers probes and profile requests and keeps a Monitor per peer.
type Service struct {
	host     host.Host
	models   *adaptive.Models
	progress time.Duration // progressTimeout; tests shorten it
	mu       sync.Mutex
	monitors map[peer.ID]*Monitor
	probing  map[peer.ID]bool // peers whose probe is being received
	stats    Stats            // Served and Refused
}

// New starts the service on the libp2p host h (a p2pmsg node's Host()),
// serving models' decode profile (adaptive.Models.TimeDecodes teaches it).
func New(h host.Host, models *adaptive.Models) (*Service, error) {
	return newService(h, models, progressTimeout)
}

func newService(h host.Host, models *adaptive.Models, progress time.Duration) (*Service, error) {
	if h == nil || models == nil {
		return nil, fmt.Errorf("%w: nil host or models", ErrBadOption)
	}
	s := &Service{host: h, models: models, progress: progress, monitors: map[peer.ID]*Monitor{}, probing: map[peer.ID]bool{}}
	h.SetStreamHandler(ProtocolID, s.handle)
	return s, nil
}

// Close stops answering probes and profile requests.
func (s *Service) Close() error { s.host.RemoveStreamHandler(ProtocolID); return nil }

// Stats returns the probes the service answered (Served) and refused.
func (s *Service) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

func (s *Service) handle(st network.Stream) {
	defer st.Close()
	end := time.Now().Add(requestTimeout)
	st.SetDeadline(end)
	st.SetReadDeadline(time.Now().Add(s.progress))
	r := bufio.NewReaderSize(st, 16) // the request; a probe's bytes are read beside it
	op, h, err := readRequest(r)
	if err == nil && op == opProfile {
		var b []byte
		if b, err = s.models.Profile().MarshalBinary(); err == nil {
			_, err = st.Write(appendFrame(nil, b))
		}
	} else if err == nil {
		var rep report
		if rep, err = s.serveProbe(st, r, h, end); err == nil {
			_, err = st.Write(appendFrame(nil, appendReport(nil, rep)))
		}
	}
	if err != nil {
		st.Reset()
	}
}

// serveProbe receives a probe within the limits above and reports its
// reads.
func (s *Service) serveProbe(st network.Stream, r *bufio.Reader, h probeHeader, end time.Time) (report, error) {
	p := st.Conn().RemotePeer()
	s.mu.Lock()
	if s.probing[p] || len(s.probing) >= maxProbing {
		s.stats.Refused++
		s.mu.Unlock()
		return report{}, errors.New("pathinfo: busy")
	}
	s.probing[p] = true
	s.stats.Served++
	s.mu.Unlock()
	defer func() { s.mu.Lock(); delete(s.probing, p); s.mu.Unlock() }()
	rec := recorder{gap: max(h.Gap, time.Millisecond)}
	// What arrived with the request is part of the first read.
	first, _ := r.Discard(min(r.Buffered(), h.Size))
	buf := make([]byte, min(h.Size, probeWindow))
	for left, window := h.Size-first, 0; left > 0; {
		if window <= 0 {
			window = min(left, probeWindow)
			st.SetReadDeadline(time.Now().Add(min(s.progress, time.Until(end))))
		}
		n, err := st.Read(buf[:window])
		if n > 0 || first > 0 {
			rec.read(first+n, time.Now())
			left, window, first = left-n, window-n, 0
		}
		if err != nil && left > 0 { // QUIC returns the last bytes with the end
			return report{}, err
		}
	}
	if first > 0 {
		rec.read(first, time.Now())
	}
	return rec.rep, nil
}

// Monitor returns the monitor of the path to p, creating it on first use:
// it measures nothing (the models keep no paths) until Ensure is called.
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
	var b []byte
	if err == nil {
		stop := context.AfterFunc(ctx, func() { st.Reset() })
		if _, err = st.Write(req); err == nil && body != nil {
			err = body(st)
		}
		if err == nil {
			// The peer may answer and close before our end leaves (on
			// QUIC, CloseWrite then fails): the answer decides.
			_ = st.CloseWrite()
			b, err = readFrame(bufio.NewReader(st), maxFrame)
		}
		stop()
		if err != nil {
			st.Reset()
			err = cmp.Or(ctx.Err(), err)
		}
		st.Close()
	}
	if errors.Is(err, msmux.ErrNotSupported[protocol.ID]{}) {
		err = errUnsupported
	}
	if err != nil {
		return nil, fmt.Errorf("pathinfo: %s: %w", p, err)
	}
	return b, nil
}

// errUnsupported is a peer without pathinfo: Ensure then goes without.
var errUnsupported = errors.New("pathinfo: peer does not speak " + string(ProtocolID))
