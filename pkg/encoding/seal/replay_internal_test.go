package seal

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// epoch is the tests' clock: replay checks take the time as an argument.
var epoch = time.Unix(1_800_000_000, 0)

// seqOf is the sequence (stream, counter, time) an element carries.
func seqOf(stream uint64, ctr uint64, sealed time.Time) []byte {
	b := binary.BigEndian.AppendUint64(nil, stream)
	b = binary.BigEndian.AppendUint64(b, ctr)
	return binary.BigEndian.AppendUint64(b, uint64(sealed.Unix()))
}

// TestReplayTimeWindow: an element is accepted sealed from ReplayMaxAge
// before the opener's clock to ReplayMaxSkew after it, and refused
// outside (an element dated a year ahead was accepted, and when its
// stream was forgotten, held every new stream out for that year).
func TestReplayTimeWindow(t *testing.T) {
	var tb replayTable
	for i, tt := range []struct {
		sealed time.Time
		ok     bool
	}{
		{epoch, true},
		{epoch.Add(ReplayMaxSkew), true},
		{epoch.Add(ReplayMaxSkew + time.Second), false},
		{epoch.Add(365 * 24 * time.Hour), false},
		{time.Unix(1<<62, 0), false},
		{epoch.Add(-ReplayMaxAge), true},
		{epoch.Add(-ReplayMaxAge - time.Second), false},
	} {
		err := tb.check("psk:k", seqOf(uint64(i), 1, tt.sealed), epoch)
		if tt.ok != (err == nil) || err != nil && !errors.Is(err, encoding.ErrReplay) {
			t.Errorf("sealed %v from the clock: %v", tt.sealed.Sub(epoch), err)
		}
	}
	var big [seqSize]byte
	binary.BigEndian.PutUint64(big[16:], 1<<63+5)
	if err := tb.check("psk:k", big[:], epoch); !errors.Is(err, encoding.ErrReplay) {
		t.Errorf("sealed at 2^63+5: %v", err)
	}
	if got := tb.refused.Load(); got != 5 {
		t.Errorf("refused %d, want 5 counted", got)
	}
}

// TestReplayStreamsPerKey: a flood of streams of one key (anyone may seal
// to a peer's identity) neither makes the opener forget another key's
// streams nor holds that key's new streams out: the table once held 4,096
// streams for all keys, with one floor, so one message of 4,200 elements
// sealed to the identity locked every pre-shared-key sender out. Replays
// of the other key stay refused, and the flooded key's own new streams
// are held out no longer than ReplayMaxSkew after its last element.
func TestReplayStreamsPerKey(t *testing.T) {
	var tb replayTable
	if err := tb.check("psk:team", seqOf(1, 1, epoch), epoch); err != nil {
		t.Fatal(err)
	}
	// Once the flood's first streams are forgotten, its later ones are
	// refused too: what matters is what it leaves behind.
	ahead := epoch.Add(time.Minute) // within the skew any version allowed
	for i := range ReplayStreams + 100 {
		tb.check("peer:me", seqOf(1000+uint64(i), 1, ahead), epoch)
	}
	if err := tb.check("psk:team", seqOf(1, 2, epoch), epoch); err != nil {
		t.Errorf("known stream of the other key after the flood: %v", err)
	}
	if err := tb.check("psk:team", seqOf(2, 1, epoch), epoch); err != nil {
		t.Errorf("new stream of the other key after the flood: %v", err)
	}
	if err := tb.check("psk:team", seqOf(1, 1, epoch), epoch); !errors.Is(err, encoding.ErrReplay) {
		t.Errorf("replay of the other key: %v, want ErrReplay", err)
	}
	// The flooded key forgot streams sealed at ahead: a new stream sealed
	// no later may replay one, a later one is new.
	if err := tb.check("peer:me", seqOf(7, 1, ahead), epoch); !errors.Is(err, encoding.ErrReplay) {
		t.Errorf("unknown stream of the flooded key below its floor: %v, want ErrReplay", err)
	}
	later := ahead.Add(time.Second)
	if err := tb.check("peer:me", seqOf(8, 1, later), later); err != nil {
		t.Errorf("new stream of the flooded key after its floor: %v", err)
	}
}

// TestFloodOfOneKeyThroughTheCodec is the attack through the codec, with
// the flood sealed with another key the opener holds (a pre-shared key,
// which makes it cheap; sealing to the identity, as an attacker would,
// costs an X25519 exchange per element and reaches the same table): more
// than ReplayStreams elements, each from a stream of its own and dated as
// far ahead as the opener allows, then an honest sender's first element
// with the first key, which opens.
func TestFloodOfOneKeyThroughTheCodec(t *testing.T) {
	team, other := make([]byte, KeySize), make([]byte, KeySize)
	other[0] = 1
	opener, err := New(WithPSK("team", team), WithPSK("other", other))
	if err != nil {
		t.Fatal(err)
	}
	opener.now = func() time.Time { return epoch }
	b := encoding.Binding{Name: "x", PipeID: "urn:jxta:pipe", Header: []byte("h")}
	sealer := func(id string, key []byte, at time.Time) *Codec {
		c, err := New(WithPSK(id, key))
		if err != nil {
			t.Fatal(err)
		}
		c.now = func() time.Time { return at }
		return c
	}
	open := func(c *Codec) error {
		sealed, err := c.Encode(nil, []byte("hi"), b)
		if err != nil {
			t.Fatal(err)
		}
		_, err = opener.Decode(nil, sealed, c.Params(), b, 2)
		return err
	}
	for range ReplayStreams + 100 {
		open(sealer("other", other, epoch.Add(ReplayMaxSkew)))
	}
	if err := open(sealer("team", team, epoch)); err != nil {
		t.Fatalf("an honest sender with the team key, after a flood with the other: %v", err)
	}
}
