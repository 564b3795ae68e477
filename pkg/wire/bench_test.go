package wire_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

var benchSizes = []int{1, 1 << 10, 64 << 10, 1 << 20}

func benchMessage(size int) *message.Message {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i)
	}
	return message.New(message.Bytes("", "payload", data))
}

func BenchmarkEncode(b *testing.B) {
	for _, size := range benchSizes {
		m := benchMessage(size)
		b.Run(fmt.Sprintf("size=%d/append", size), func(b *testing.B) {
			n, _ := wire.Size(m)
			buf := make([]byte, 0, n)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				out, err := wire.Append(buf[:0], m)
				if err != nil || int64(len(out)) != n {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("size=%d/writer", size), func(b *testing.B) {
			enc := wire.NewEncoder(io.Discard)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := enc.Encode(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, size := range benchSizes {
		enc, _ := wire.Marshal(benchMessage(size))
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			r := bytes.NewReader(enc)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(enc)
				m, err := wire.Decode(r)
				if err != nil || len(m.At(0).Data) != size {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUnmarshal decodes from a byte slice, which the decoder reads
// without going through io.Reader.
func BenchmarkUnmarshal(b *testing.B) {
	for _, size := range benchSizes {
		enc, _ := wire.Marshal(benchMessage(size))
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				m, err := wire.Unmarshal(enc)
				if err != nil || len(m.At(0).Data) != size {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecoderStream decodes back-to-back messages from a stream, the
// endpoint's situation.
func BenchmarkDecoderStream(b *testing.B) {
	for _, size := range benchSizes {
		one, _ := wire.Marshal(benchMessage(size))
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			r := &repeatReader{msg: one}
			dec, err := wire.NewDecoder(r)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				m, err := dec.Decode()
				if err != nil || len(m.At(0).Data) != size {
					b.Fatal(err)
				}
			}
		})
	}
}

// repeatReader yields the same message forever.
type repeatReader struct {
	msg []byte
	off int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.msg[r.off:])
		n += c
		r.off = (r.off + c) % len(r.msg)
	}
	return n, nil
}
