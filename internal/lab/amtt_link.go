package lab

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
)

// CustomProfile is the profile name of a link given only by its values:
// it starts unshaped and takes what LinkOverrides set.
const CustomProfile = "custom"

// LinkOverrides change a profile's link. Negative fields keep the
// profile's value.
type LinkOverrides struct {
	Up, Down    int64         // bits per second each way; 0 is unlimited
	RTT, Jitter time.Duration // RTT is split evenly; Jitter applies each way
	// Loss is linkemu.Shape.Loss, each way: the probability that a TCP
	// segment is lost, which the stream sees as its repair's delay.
	Loss float64
}

// NoOverrides keeps the profile as it is.
var NoOverrides = LinkOverrides{Up: -1, Down: -1, RTT: -1, Jitter: -1, Loss: -1}

// ResolveLink returns the link of a named profile (linkemu.Lookup, or
// CustomProfile) with the overrides applied, and the label results carry:
// the profile's name, marked with "*" when a named profile was changed.
func ResolveLink(profile string, o LinkOverrides) (string, linkemu.Link, error) {
	var link linkemu.Link
	if profile != CustomProfile {
		p, err := linkemu.Lookup(profile)
		if err != nil {
			return "", link, fmt.Errorf("%w, or %s", err, CustomProfile)
		}
		link = p.Link
	}
	changed := false
	if o.Up >= 0 {
		link.Up.Bandwidth, changed = o.Up/8, true
	}
	if o.Down >= 0 {
		link.Down.Bandwidth, changed = o.Down/8, true
	}
	if o.RTT >= 0 {
		link.Up.Latency, link.Down.Latency, changed = o.RTT/2, o.RTT-o.RTT/2, true
	}
	if o.Jitter >= 0 {
		link.Up.Jitter, link.Down.Jitter, changed = o.Jitter, o.Jitter, true
	}
	if o.Loss >= 0 {
		link.Up.Loss, link.Down.Loss, changed = o.Loss, o.Loss, true
	}
	if err := link.Validate(); err != nil {
		return "", link, err
	}
	if changed && profile != CustomProfile {
		profile += "*"
	}
	return profile, link, nil
}

// ParseBitRate reads a rate in bits per second: a number with an optional
// decimal suffix k, M or G and an optional "bit/s", "bps" or "b" after it
// ("640k", "3Mbit/s", "100M", "56000").
func ParseBitRate(s string) (int64, error) {
	t := strings.TrimSpace(s)
	for _, unit := range []string{"bit/s", "bps", "b"} {
		t = strings.TrimSuffix(t, unit)
	}
	mult := 1.0
	if t != "" {
		switch t[len(t)-1] {
		case 'k', 'K':
			mult = 1e3
		case 'M':
			mult = 1e6
		case 'G':
			mult = 1e9
		}
		if mult != 1 {
			t = t[:len(t)-1]
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || !(v >= 0 && v*mult <= 1e12) { // NaN fails both
		return 0, fmt.Errorf("lab: invalid bit rate %q (want e.g. 640k, 3M, 100Mbit/s)", s)
	}
	return int64(v * mult), nil
}

// FormatBitRate prints bits per second the way ParseBitRate reads them.
func FormatBitRate(bps int64) string {
	switch {
	case bps == 0:
		return "unlimited"
	case bps%1e9 == 0:
		return strconv.FormatInt(bps/1e9, 10) + "Gbit/s"
	case bps%1e6 == 0:
		return strconv.FormatInt(bps/1e6, 10) + "Mbit/s"
	case bps%1e3 == 0:
		return strconv.FormatInt(bps/1e3, 10) + "kbit/s"
	}
	return strconv.FormatInt(bps, 10) + "bit/s"
}

// DescribeLink says what a link is: "640kbit/s up, 3Mbit/s down, 60ms RTT".
func DescribeLink(l linkemu.Link) string {
	s := fmt.Sprintf("%s up, %s down, %v RTT", FormatBitRate(l.Up.Bandwidth*8), FormatBitRate(l.Down.Bandwidth*8), l.RTT())
	if l.Up.Jitter > 0 || l.Down.Jitter > 0 {
		s += fmt.Sprintf(", jitter %v/%v", l.Up.Jitter, l.Down.Jitter)
	}
	if l.Up.Loss > 0 || l.Down.Loss > 0 {
		s += fmt.Sprintf(", loss %s/%s", FormatLoss(l.Up.Loss), FormatLoss(l.Down.Loss))
	}
	return s
}

// ParseLoss reads a segment loss probability as a percentage ("1%",
// "0.5%") or a fraction ("0.01"), 0 to linkemu.MaxLoss.
func ParseLoss(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(t, "%")), 64)
	if pct {
		v /= 100
	}
	if err != nil || !(v >= 0 && v <= linkemu.MaxLoss) { // NaN fails both
		return 0, fmt.Errorf("lab: invalid loss %q (want a segment loss probability from 0 to %s, e.g. 1%% or 0.01)", s, FormatLoss(linkemu.MaxLoss))
	}
	return v, nil
}

// FormatLoss prints a loss probability as a percentage.
func FormatLoss(p float64) string { return strconv.FormatFloat(100*p, 'g', 4, 64) + "%" }
