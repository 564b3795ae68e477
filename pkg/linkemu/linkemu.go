// Package linkemu emulates network links in process, for experiments on a
// machine whose kernel has no netem: it wraps any net.Conn (and, through
// Transport, a libp2p node's connections) so that what crosses it behaves
// as if it went through a bottleneck link.
//
// # The model
//
// Each direction is a bottleneck link with a FIFO queue in front of it.
// Bytes written are cut into packets; a packet starts serializing when the
// link is free, takes size/Bandwidth to serialize, then propagates for
// Latency plus a random jitter in [0, Jitter) drawn from a seeded generator
// (so a run can be repeated). Packets never overtake each other: a packet
// whose jitter would make it arrive before its predecessor arrives with it.
// When QueueLimit bytes are written but not yet delivered, Write blocks, as
// a full socket buffer would: memory stays bounded and a sender cannot
// outrun the link.
//
// # Loss
//
// The emulation sits under a reliable byte stream (TCP, and TLS and yamux
// over it), which never loses a byte: on a lossy link a lost TCP segment
// is sent again, and the stream delivers nothing beyond it until it
// arrives. So Loss is not dropped bytes but the delay a reliable stream
// pays for them. Each packet is cut into segments of MSS bytes; each
// segment is lost with probability Loss (drawn from the seeded
// generator). A packet with a lost segment is delivered late, and every
// byte after it waits for it (the queue is FIFO), by one repair:
//
//   - fast retransmit, when at least three segments follow the lost one
//     (in its packet and in those already queued behind it when it would
//     have arrived): the three duplicate acknowledgements their arrival
//     sends back take one way, the retransmission the other, so it arrives
//     one RTT (the link's round-trip latency) after the third segment
//     following it;
//   - a retransmission timeout otherwise (a loss among a write's last
//     segments: no three segments to acknowledge): it is sent RTO after
//     the segment was, and arrives one latency later. RTO is RTT plus 200
//     ms, Linux's rule on a steady path (SRTT + 4·RTTVAR, with RTTVAR at
//     least TCP_RTO_MIN/4 = 50 ms).
//
// A retransmission is lost again with probability Loss, and each such
// loss adds the timeout again, doubled each time (exponential backoff;
// at most 6). Several segments lost in one packet are repaired together
// (SACK), and a retransmitted segment takes its serialization on the
// link again. Not modelled: the congestion window's halving after a loss
// (which slows a long transfer on a path whose bandwidth-delay product is
// many segments, beyond the delay above), Linux's tail loss probe (which
// repairs some tail losses in about two RTTs instead of RTO), lost
// acknowledgements, and losses in bursts. It is the uniform loss of
// paper 002's first environment, seen from the application.
//
// A Link has an Up shape (applied to what this end writes) and a Down shape
// (applied to what it reads), so wrapping one end of a connection emulates
// both directions of an access link such as DSL.
package linkemu

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// ErrUnknownProfile is returned by Lookup for a name with no profile.
var ErrUnknownProfile = errors.New("linkemu: unknown profile")

// ErrBadShape is returned for negative or inconsistent shape values.
var ErrBadShape = errors.New("linkemu: invalid link shape")

// Shape describes one direction of a link.
type Shape struct {
	// Bandwidth in bytes per second; 0 means unlimited.
	Bandwidth int64 `json:"bandwidth_Bps"`
	// Latency is the one-way propagation delay.
	Latency time.Duration `json:"latency_ns"`
	// Jitter is the upper bound of a uniform random extra delay.
	Jitter time.Duration `json:"jitter_ns"`
	// QueueLimit is how many bytes may be written but undelivered before
	// Write blocks; 0 means DefaultQueueLimit, or twice the
	// bandwidth-delay product when that is larger.
	QueueLimit int `json:"queue_limit"`
	// Loss is the probability that a TCP segment (MSS bytes) is lost,
	// in [0, MaxLoss]; the stream sees it as the delay of its repair
	// (see the package's Loss section). Absent from JSON when 0.
	Loss float64 `json:"loss,omitempty"`
}

// MSS is the segment size Loss applies to: an Ethernet frame's TCP
// payload.
const MSS = 1460

// MaxLoss bounds Shape.Loss: beyond it a stream mostly waits on
// timeouts, and the repair model (one repair per packet) no longer holds.
const MaxLoss = 0.2

// Repair timing of a lost segment (package doc, Loss).
const (
	rtoMin      = 200 * time.Millisecond
	maxRetries  = 6
	dupAckCount = 3
)

// DefaultQueueLimit is the queue of a shape that sets none: about a
// socket buffer.
const DefaultQueueLimit = 256 << 10

// Validate reports a shape that cannot be emulated.
func (s Shape) Validate() error {
	if s.Bandwidth < 0 || s.Latency < 0 || s.Jitter < 0 || s.QueueLimit < 0 {
		return fmt.Errorf("%w: negative value in %+v", ErrBadShape, s)
	}
	if !(s.Loss >= 0 && s.Loss <= MaxLoss) { // NaN fails too
		return fmt.Errorf("%w: loss %v out of [0, %v]", ErrBadShape, s.Loss, MaxLoss)
	}
	return nil
}

// IsZero reports whether the shape changes nothing.
func (s Shape) IsZero() bool {
	return s.Bandwidth == 0 && s.Latency == 0 && s.Jitter == 0 && s.Loss == 0
}

// RTO is the retransmission timeout a lost segment waits for when no
// fast retransmit repairs it, on a path of round trip rtt.
func RTO(rtt time.Duration) time.Duration { return rtt + rtoMin }

func (s Shape) queueLimit() int {
	if s.QueueLimit > 0 {
		return s.QueueLimit
	}
	q := DefaultQueueLimit
	if s.Bandwidth > 0 {
		bdp := float64(s.Bandwidth) * (2*s.Latency + s.Jitter).Seconds()
		q = max(q, int(2*bdp))
	}
	return q
}

// SerializationTime is how long n bytes take to cross the bottleneck.
func (s Shape) SerializationTime(n int) time.Duration {
	if s.Bandwidth <= 0 {
		return 0
	}
	if n > 1<<33 { // n*1e9 would overflow int64
		return time.Duration(float64(n) / float64(s.Bandwidth) * float64(time.Second))
	}
	// Integer arithmetic, rounded up: exact and the same on every build.
	return time.Duration((int64(n)*int64(time.Second) + s.Bandwidth - 1) / s.Bandwidth)
}

// TransferTime is the analytic time for n bytes written at once to be
// delivered: serialization plus one-way latency (jitter excluded).
func (s Shape) TransferTime(n int) time.Duration { return s.SerializationTime(n) + s.Latency }

// Link is both directions as seen from one end.
type Link struct {
	Up   Shape `json:"up"`   // what this end sends
	Down Shape `json:"down"` // what this end receives
}

// Validate reports a link that cannot be emulated.
func (l Link) Validate() error {
	if err := l.Up.Validate(); err != nil {
		return err
	}
	return l.Down.Validate()
}

// Reverse returns the link as seen from the other end.
func (l Link) Reverse() Link { return Link{Up: l.Down, Down: l.Up} }

// RTT is the round-trip propagation delay.
func (l Link) RTT() time.Duration { return l.Up.Latency + l.Down.Latency }

// Profile is a named link with where its figures come from.
type Profile struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Source      string `json:"source"`
	Link        Link   `json:"link"`
}

func kbit(k float64) int64 { return int64(k * 1000 / 8) }

func symmetric(bw int64, rtt time.Duration) Link {
	s := Shape{Bandwidth: bw, Latency: rtt / 2}
	return Link{Up: s, Down: s}
}

var profiles = []Profile{
	{
		Name:        "dialup",
		Description: "V.90 modem: 56 kbit/s down, 33.6 kbit/s up, 150 ms RTT",
		Source:      "56 kbit/s as in the gzip study of application servers (papers/003) and NAM's home clients (papers/004); 33.6 kbit/s is V.90's upstream; 150 ms RTT is typical of modem links",
		Link: Link{
			Up:   Shape{Bandwidth: kbit(33.6), Latency: 75 * time.Millisecond},
			Down: Shape{Bandwidth: kbit(56), Latency: 75 * time.Millisecond},
		},
	},
	{
		Name:        "dsl",
		Description: "ADSL: 640 kbit/s up, 3 Mbit/s down, 60 ms RTT",
		Source:      "640 kbit/s up is the sender's DSL uplink of the Compression Pipe Adapter study (papers/000); 3 Mbit/s down is the common ADSL tier sold with a 640 kbit/s uplink at the time; 60 ms RTT covers ADSL interleaving plus a regional path to a campus network",
		Link: Link{
			Up:   Shape{Bandwidth: kbit(640), Latency: 30 * time.Millisecond},
			Down: Shape{Bandwidth: kbit(3000), Latency: 30 * time.Millisecond},
		},
	},
	{
		Name:        "cable",
		Description: "cable modem: 2.4 Mbit/s both ways, 40 ms RTT",
		Source:      "2.4 Mbit/s is the broadband case of the gzip study of application servers (papers/003); 40 ms RTT is typical of DOCSIS access",
		Link:        symmetric(kbit(2400), 40*time.Millisecond),
	},
	{
		Name:        "t1",
		Description: "T1 line: 1.2 Mbit/s, 90 ms RTT",
		Source:      "NAM's US coast-to-coast T1 experiment (papers/004): 1-1.2 Mbit/s, RTT 90 ms",
		Link:        symmetric(kbit(1200), 90*time.Millisecond),
	},
	{
		Name:        "lan",
		Description: "Fast Ethernet: 100 Mbit/s, 0.2 ms RTT",
		Source:      "the 100BT switched LAN of the Compression Pipe Adapter study (papers/000); 0.2 ms is a switched Fast Ethernet round trip",
		Link:        symmetric(kbit(100_000), 200*time.Microsecond),
	},
	{
		Name:        "transatlantic",
		Description: "transatlantic path: 95 Mbit/s, 178 ms RTT",
		Source:      "NAM's USC-Saarland experiment (papers/004): 90-97 Mbit/s, RTT 178 ms",
		Link:        symmetric(kbit(95_000), 178*time.Millisecond),
	},
	{
		Name:        "gbe",
		Description: "Gigabit Ethernet: 1 Gbit/s, 0.3 ms RTT",
		Source:      "NAM's Gbps intranet experiment (papers/004): RTT 0.3 ms; 1 Gbit/s is the switch's line rate",
		Link:        symmetric(kbit(1_000_000), 300*time.Microsecond),
	},
}

// Profiles returns the named profiles, sorted by name.
func Profiles() []Profile {
	out := append([]Profile(nil), profiles...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the profile with the given name. "none" and "loopback"
// return an unshaped link.
func Lookup(name string) (Profile, error) {
	switch name {
	case "none", "loopback":
		return Profile{Name: name, Description: "no emulation: the machine's own loopback"}, nil
	}
	for _, p := range profiles {
		if p.Name == name {
			return p, nil
		}
	}
	names := make([]string, 0, len(profiles))
	for _, p := range Profiles() {
		names = append(names, p.Name)
	}
	return Profile{}, fmt.Errorf("%w %q (have %s, none, loopback)", ErrUnknownProfile, name, strings.Join(names, ", "))
}
