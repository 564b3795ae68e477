package socket

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func FuzzReadHandshake(f *testing.F) {
	good := binary.AppendUvarint(nil, 20)
	good = append(good, "abcdefghijklmnopqrst"...)
	for _, s := range [][]byte{good, {}, {0}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, {65}, good[:5]} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		key, err := readHandshake(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrHandshake) {
				t.Fatalf("error %v does not wrap ErrHandshake", err)
			}
			return
		}
		if len(key) > maxKey {
			t.Fatalf("accepted a %d-byte key", len(key))
		}
		n, k := binary.Uvarint(b)
		if k <= 0 || n != uint64(len(key)) || !bytes.Equal(b[k:k+len(key)], []byte(key)) {
			t.Fatalf("%x read as %q", b, key)
		}
	})
}
