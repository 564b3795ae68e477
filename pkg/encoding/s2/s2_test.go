package s2_test

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/codectest"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/s2"
)

func TestConformance(t *testing.T) {
	c := s2.New()
	codectest.Run(t, c)
}

func FuzzDecode(f *testing.F) {
	c := s2.New()
	// Lying lengths, within the fuzz target's limit: blocks claiming
	// 60,000 bytes and holding garbage, or a literal byte.
	f.Add(append(binary.AppendUvarint(nil, 60000), 0xff, 0xff, 0xff))
	f.Add(append(binary.AppendUvarint(nil, 60000), 0, 'x'))
	codectest.Fuzz(f, c)
}

// Blocks whose length header claims far more than their tags hold are
// refused before room is made for the claim.
func TestLyingBlockLengthRefused(t *testing.T) {
	const claim = 16<<20 - 1
	c := s2.New()
	for name, block := range map[string][]byte{
		"garbage":    append(binary.AppendUvarint(nil, claim), 0xff, 0xff, 0xff),
		"one byte":   append(binary.AppendUvarint(nil, claim), 0, 'x'),
		"bad repeat": append(binary.AppendUvarint(nil, claim), 0, 'x', 0x1d, 0, 0xfa, 0xff, 0xfe), // the rest a repeat, before any offset
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := c.Decode(nil, block, c.Params(), encoding.Binding{}, claim)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, encoding.ErrCorrupt) {
			t.Fatalf("%s: got %v, want ErrCorrupt", name, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
			t.Errorf("%s: refusing a %d-byte block claiming %d bytes allocated %d KiB", name, len(block), claim, alloc>>10)
		}
	}
}
