package pathinfo

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// ErrProtocol reports a malformed or out-of-bounds pathinfo message.
var ErrProtocol = errors.New("pathinfo: protocol error")

// Requests, one per stream: the first byte says which.
const (
	opProbe   byte = 1
	opProfile byte = 2
)

// Bounds of the protocol: the largest probe a node accepts (a gigabit
// link carries it in 34 ms), the bursts of a report, the gap a sender may
// ask bursts to be split at, and a report's encoded size.
const (
	MaxProbe  = 4 << 20
	maxBursts = 64
	maxGap    = 10 * time.Second
	maxReport = 16 + maxBursts*30
)

// A burst is a run of reads of a probe with no gap longer than the
// requested one: with slow start, the first is the initial window.
type burst struct {
	Bytes int
	Start time.Duration // since the first byte arrived
	Dur   time.Duration // from its first read to its last
}

// report is what the receiver of a probe saw.
type report struct {
	Received   int           // bytes of the probe received
	FirstChunk int           // bytes in the first read, which carry no timing
	Span       time.Duration // from the first read to the last
	Bursts     []burst
}

// probeHeader is a probe request's header.
type probeHeader struct {
	Size int
	Gap  time.Duration
}

func appendProbeHeader(b []byte, h probeHeader) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(append(b, opProbe), uint64(h.Size)), uint64(h.Gap))
}

// readRequest reads a request's op and, for a probe, its header, refusing
// sizes and gaps beyond the protocol's bounds.
func readRequest(r *bufio.Reader) (op byte, h probeHeader, err error) {
	if op, err = r.ReadByte(); err != nil || op == opProfile {
		return op, h, err
	}
	size, err1 := binary.ReadUvarint(r)
	gap, err2 := binary.ReadUvarint(r)
	if op != opProbe || err1 != nil || err2 != nil || size == 0 || size > MaxProbe || gap > uint64(maxGap) {
		return 0, h, fmt.Errorf("%w: request %d", ErrProtocol, op)
	}
	return op, probeHeader{Size: int(size), Gap: time.Duration(gap)}, nil
}

func appendReport(b []byte, r report) []byte {
	v := []uint64{uint64(r.Received), uint64(r.FirstChunk), uint64(r.Span), uint64(len(r.Bursts))}
	for _, u := range r.Bursts {
		v = append(v, uint64(u.Bytes), uint64(u.Start), uint64(u.Dur))
	}
	for _, x := range v {
		b = binary.AppendUvarint(b, x)
	}
	return b
}

// parseReport decodes a report: at most maxBursts bursts, byte counts
// within MaxProbe and adding up, durations within an hour and within the
// span.
func parseReport(b []byte) (report, error) {
	if len(b) > maxReport {
		return report{}, fmt.Errorf("%w: report of %d bytes", ErrProtocol, len(b))
	}
	var v []uint64
	for p := 0; p < len(b); {
		x, n := binary.Uvarint(b[p:])
		if n <= 0 {
			return report{}, fmt.Errorf("%w: report", ErrProtocol)
		}
		v, p = append(v, x), p+n
	}
	if len(v) < 4 || v[0] > MaxProbe || v[1] > v[0] || v[2] > uint64(time.Hour) || v[3] > maxBursts || len(v) != 4+3*int(v[3]) {
		return report{}, fmt.Errorf("%w: report header", ErrProtocol)
	}
	r := report{Received: int(v[0]), FirstChunk: int(v[1]), Span: time.Duration(v[2])}
	total := uint64(0)
	for u := v[4:]; len(u) > 0; u = u[3:] {
		if u[0] > MaxProbe || u[1] > v[2] || u[2] > v[2] || u[1]+u[2] > v[2] {
			return report{}, fmt.Errorf("%w: report burst", ErrProtocol)
		}
		total += u[0]
		r.Bursts = append(r.Bursts, burst{Bytes: int(u[0]), Start: time.Duration(u[1]), Dur: time.Duration(u[2])})
	}
	if total > v[0] {
		return report{}, fmt.Errorf("%w: report bursts", ErrProtocol)
	}
	return r, nil
}

// readFrame reads a uvarint length (at most max) and that many bytes.
func readFrame(r *bufio.Reader, max int) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err == nil && n > uint64(max) {
		err = fmt.Errorf("%w: frame of %d bytes, limit %d", ErrProtocol, n, max)
	}
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return b, err
}

func appendFrame(b, payload []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(payload))), payload...)
}

// recorder times the reads of a probe and cuts them into bursts.
type recorder struct {
	gap      time.Duration
	t0, last time.Time
	rep      report
}

func (c *recorder) read(n int, at time.Time) {
	if c.rep.Bursts == nil {
		c.t0, c.last, c.rep = at, at, report{Received: n, FirstChunk: n, Bursts: []burst{{Bytes: n}}}
		return
	}
	c.rep.Received += n
	since := at.Sub(c.t0)
	cur := &c.rep.Bursts[len(c.rep.Bursts)-1]
	if at.Sub(c.last) > c.gap && len(c.rep.Bursts) < maxBursts {
		c.rep.Bursts = append(c.rep.Bursts, burst{Bytes: n, Start: since})
	} else {
		cur.Bytes += n
		cur.Dur = since - cur.Start
	}
	c.rep.Span = since
	c.last = at
}
