package adaptive_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// fakeCodec "compresses" periodic data (its period at the start) to its
// period plus padding of pad·n bytes, and takes a set time per byte
// (sleeping: exact in a testing/synctest bubble's virtual time): a codec
// whose ratio and speeds a test chooses.
type fakeCodec struct {
	name     string
	level    int
	pad      float64       // payload bytes per input byte, beyond the period
	enc, dec time.Duration // per input byte
	period   int
	encodes  int
	mu       sync.Mutex
}

func (f *fakeCodec) Name() string            { return f.name }
func (f *fakeCodec) Params() encoding.Params { return encoding.Params{Level: f.level} }

func (f *fakeCodec) Encode(dst, src []byte, _ encoding.Binding) ([]byte, error) {
	f.mu.Lock()
	f.encodes++
	f.mu.Unlock()
	time.Sleep(time.Duration(len(src)) * f.enc)
	p := min(f.period, len(src))
	dst = binary.AppendUvarint(dst, uint64(len(src)))
	dst = binary.AppendUvarint(dst, uint64(p))
	dst = append(dst, src[:p]...)
	return append(dst, make([]byte, int(f.pad*float64(len(src))))...), nil
}

func (f *fakeCodec) Decode(dst, src []byte, _ encoding.Params, _ encoding.Binding, max int) ([]byte, error) {
	n, k := binary.Uvarint(src)
	if k <= 0 || n > uint64(max) {
		return dst, encoding.ErrCorrupt
	}
	src = src[k:]
	p, k := binary.Uvarint(src)
	if k <= 0 || p > uint64(len(src)-k) || p == 0 && n > 0 {
		return dst, encoding.ErrCorrupt
	}
	pat := src[k : k+int(p)]
	time.Sleep(time.Duration(n) * f.dec)
	for len(dst) < int(n) {
		dst = append(dst, pat[:min(len(pat), int(n)-len(dst))]...)
	}
	return dst, nil
}

func (f *fakeCodec) Encodes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.encodes
}

// periodic is n bytes repeating a 64-byte pattern of text.
func periodic(n int) []byte {
	pat := []byte("<r><id>1</id><name>Ann</name><v>42</v></r><r><id>2</id></r>\n....")[:64]
	return bytes.Repeat(pat, n/64+1)[:n]
}

func mustRegistry(codecs ...encoding.Codec) *encoding.Registry {
	r, err := encoding.NewRegistry(codecs...)
	if err != nil {
		panic(fmt.Sprint(err))
	}
	return r
}
