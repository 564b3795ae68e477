package xmlc

import (
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// craft builds an XML payload from a main stream, recording size.
func craft(size int, main []byte) []byte {
	p := []byte{modeXMLRaw}
	p = binary.AppendUvarint(p, uint64(size))
	p = append(p, 0, 0, 0, 0) // checksum: never reached
	p = binary.AppendUvarint(p, uint64(len(main)))
	return append(p, main...)
}

func mainStream(structure, names, ws, misc []byte, conts ...byte) []byte {
	m := binary.AppendUvarint(nil, uint64(len(structure)))
	m = binary.AppendUvarint(m, uint64(len(names)))
	m = binary.AppendUvarint(m, uint64(len(ws)))
	m = binary.AppendUvarint(m, uint64(len(misc)))
	m = append(m, structure...)
	m = append(m, names...)
	m = append(m, ws...)
	m = append(m, misc...)
	return append(m, conts...)
}

// A structure that replays a 1 MiB whitespace run 4096 times (4 GiB) in a
// payload recording 100 bytes is refused once output passes 100 bytes,
// in memory bounded by the payload, not by the expansion.
func TestAmplificationBounded(t *testing.T) {
	s := []byte{1, 2, opWS, 0} // keep run 0: whitespace 0 (new)
	for range 4096 {
		s = append(s, 1) // replay it
	}
	ws := append([]byte(strings.Repeat(" ", 1<<20)), 0)
	payload := craft(100, mainStream(s, nil, ws, nil, 0))
	c, _ := New()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := c.Decode(nil, payload, c.Params(), encoding.Binding{}, 1<<20)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, encoding.ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("refusing allocated %d bytes", alloc)
	}
	_, err = c.Query(payload, c.Params(), "/a", 1<<20)
	if !errors.Is(err, encoding.ErrCorrupt) {
		t.Fatalf("query: got %v, want ErrCorrupt", err)
	}
}

// Counts in a payload are bounded by the bytes that could hold them: a
// container claiming 2^40 values of a zero-bit column allocates nothing
// for them.
func TestCountsBounded(t *testing.T) {
	huge := binary.AppendUvarint(nil, 1<<40)
	conts := append([]byte{1}, huge...) // one container, 2^40 values
	conts = append(conts, methodShapes, 1, 1, 0, 0, colFOR<<5, 0, 0)
	payload := craft(10, mainStream([]byte{0, 1, opText}, nil, nil, nil, conts...))
	c, _ := New()
	if _, err := c.Decode(nil, payload, c.Params(), encoding.Binding{}, 1<<20); !errors.Is(err, encoding.ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
}

// lyingFrame is a zstd frame without its magic number, as xml stores
// them: single segment, recording claim bytes of content, and holding one
// raw block of one byte.
func lyingFrame(claim uint64) []byte {
	f := append([]byte{0xE0}, binary.LittleEndian.AppendUint64(nil, claim)...)
	return append(f, 9, 0, 0, 'x')
}

// Zstd frames whose content size claims more than their blocks hold are
// refused before any room is made for the claim: in the plain-zstd mode,
// where the frame's claim is the document's size, and as an XML payload's
// main stream.
func TestLyingFrameSizesRefused(t *testing.T) {
	const claim = 16<<20 - 1
	c, _ := New()
	for name, payload := range map[string][]byte{
		"plain zstd":  append([]byte{modeGeneric}, lyingFrame(claim)...),
		"main stream": craftZ(claim, lyingFrame(claim)),
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := c.Decode(nil, payload, c.Params(), encoding.Binding{}, claim)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, encoding.ErrCorrupt) {
			t.Fatalf("%s: got %v, want ErrCorrupt", name, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
			t.Errorf("%s: refusing a %d-byte payload claiming %d bytes allocated %d KiB", name, len(payload), claim, alloc>>10)
		}
	}
}

// craftZ builds an XML payload whose main stream is the zstd frame z,
// recording size.
func craftZ(size int, z []byte) []byte {
	p := []byte{modeXMLZ}
	p = binary.AppendUvarint(p, uint64(size))
	p = append(p, 0, 0, 0, 0) // checksum: never reached
	p = binary.AppendUvarint(p, uint64(len(z)))
	return append(p, z...)
}
