package flatecodec_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/p2pmsg/p2pmsg/internal/flatecodec"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// chunkReader returns data in reads of the sizes step gives, cycling.
type chunkReader struct {
	data []byte
	step []byte
	i    int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(r.step) > 0 {
		n = int(r.step[r.i%len(r.step)]) + 1
		r.i++
	}
	n = min(n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// FuzzReadAll: ReadAll returns exactly what the reader gave when it is
// within the limit, fails with encoding.ErrTooLarge when it is not, keeps
// dst's prefix, never returns more than the limit and, however the reads
// are cut, grows dst at most as append would for prefix plus limit: the
// memory is bounded by what the caller passed and the limit, never by
// what the reader offers.
func FuzzReadAll(f *testing.F) {
	f.Add([]byte("hello"), []byte{0}, uint16(5), []byte("pre"))
	f.Add([]byte("hello"), []byte{1, 200}, uint16(4), []byte(nil))
	f.Add(bytes.Repeat([]byte("x"), 5000), []byte{255, 3}, uint16(4096), []byte("p"))
	f.Add([]byte{}, []byte{}, uint16(0), []byte(nil))
	f.Add([]byte("a"), []byte{}, uint16(0), []byte(nil))
	f.Add(bytes.Repeat([]byte("y"), 6000), []byte{7}, uint16(5), bytes.Repeat([]byte("p"), 2100))
	f.Fuzz(func(t *testing.T, data, step []byte, limit uint16, prefix []byte) {
		max := int(limit)
		out, err := flatecodec.ReadAll(bytes.Clone(prefix), &chunkReader{data: data, step: step}, max)
		if !bytes.HasPrefix(out, prefix) {
			t.Fatalf("dst's prefix lost")
		}
		got := out[len(prefix):]
		if len(got) > max {
			t.Fatalf("%d bytes out, limit %d", len(got), max)
		}
		if cap(out) > 2*(len(prefix)+max)+1024 {
			t.Fatalf("capacity %d for a %d-byte prefix and a limit of %d", cap(out), len(prefix), max)
		}
		if len(data) <= max {
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%d bytes within the limit %d: got %d, %v", len(data), max, len(got), err)
			}
			return
		}
		if !errors.Is(err, encoding.ErrTooLarge) {
			t.Fatalf("%d bytes over the limit %d: %v", len(data), max, err)
		}
	})
}

// A reader's error other than io.EOF is ErrCorrupt.
func TestReadAllReaderError(t *testing.T) {
	_, err := flatecodec.ReadAll(nil, iotest.ErrReader(io.ErrUnexpectedEOF), 10)
	if !errors.Is(err, encoding.ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %v", err)
	}
}
