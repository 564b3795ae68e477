package zstd_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/klauspost/compress/dict"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

func employeeDict(t *testing.T) []byte {
	t.Helper()
	doc := datasets.Employees(1000)
	var samples [][]byte
	for i := 0; i+1000 <= len(doc); i += 1000 {
		samples = append(samples, doc[i:i+1000])
	}
	d, err := dict.BuildZstdDict(samples, dict.Options{MaxDictSize: 8 << 10, HashBytes: 6, ZstdDictID: 4242})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDictionary(t *testing.T) {
	d := employeeDict(t)
	if id, err := zstd.DictID(d); err != nil || id != 4242 {
		t.Fatalf("DictID = %d, %v", id, err)
	}
	withDict, err := zstd.New(zstd.WithLevel(19), zstd.WithEncoderDictionary(d))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := zstd.New(zstd.WithLevel(19))
	receiver, _ := zstd.New(zstd.WithDictionaries(d))

	src := datasets.Employees(1)
	s, _ := encoding.New([]encoding.Codec{withDict}, encoding.WithSelector(encoding.ByName("doc")))
	enc, err := s.Encode(message.New(message.Element{Name: "doc", MIME: message.XMLUTF8, Data: src}))
	if err != nil {
		t.Fatal(err)
	}
	small, _ := plain.Encode(nil, src, encoding.Binding{})
	if len(enc.At(0).Data) >= len(small) {
		t.Errorf("dictionary did not help: %d bytes with (header included), %d without", len(enc.At(0).Data), len(small))
	}
	t.Logf("1-record document: %d bytes, %d with zstd-19, %d with dictionary (element incl. header)", len(src), len(small), len(enc.At(0).Data))

	regNo, _ := encoding.NewRegistry(plain)
	regYes, _ := encoding.NewRegistry(receiver)
	tests := []struct {
		name    string
		reg     *encoding.Registry
		wantErr error
	}{
		{"without dictionary", regNo, encoding.ErrNoDictionary},
		{"with dictionary", regYes, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec, _ := encoding.NewDecoder(encoding.WithRegistry(tt.reg))
			got, err := dec.Decode(enc)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if err == nil && !bytes.Equal(got.At(0).Data, src) {
				t.Fatal("round trip differs")
			}
		})
	}
	if _, err := zstd.New(zstd.WithDictionaries([]byte("not a dictionary"))); !errors.Is(err, encoding.ErrBadOption) {
		t.Fatalf("bad dictionary: %v", err)
	}
}

func TestLevels(t *testing.T) {
	for _, l := range []int{0, 23, -1} {
		if _, err := zstd.New(zstd.WithLevel(l)); !errors.Is(err, encoding.ErrBadOption) {
			t.Errorf("level %d: %v", l, err)
		}
	}
	for _, l := range []int{1, 3, 9, 19, 22} {
		c, err := zstd.New(zstd.WithLevel(l))
		if err != nil {
			t.Fatal(err)
		}
		if c.Params().Level != l {
			t.Errorf("level %d recorded as %d", l, c.Params().Level)
		}
	}
}

// A spec names a dictionary by its ID among those the factory is given.
func TestFactoryDictionary(t *testing.T) {
	d := employeeDict(t)
	f := encoding.WithFactory(zstd.Name, zstd.Factory(zstd.WithDictionaries(d)))
	tests := []struct {
		spec    string
		want    encoding.Params
		wantErr error
	}{
		{"zstd:19@4242", encoding.Params{Level: 19, DictID: 4242}, nil},
		{"zstd", encoding.Params{Level: 3}, nil},
		{"zstd@4243", encoding.Params{}, encoding.ErrNoDictionary},
		{"zstd@employees", encoding.Params{}, encoding.ErrBadOption},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			s, _ := encoding.ParseSpec(tt.spec)
			c, err := encoding.NewCodec(s, f)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("%v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if c.Params() != tt.want {
				t.Fatalf("params %+v, want %+v", c.Params(), tt.want)
			}
			src := datasets.Employees(3)
			enc, err := c.Encode(nil, src, encoding.Binding{})
			if err != nil {
				t.Fatal(err)
			}
			receiver, _ := zstd.New(zstd.WithDictionaries(d))
			if dec, err := receiver.Decode(nil, enc, c.Params(), encoding.Binding{}, len(src)); err != nil || !bytes.Equal(dec, src) {
				t.Fatalf("round trip: %v", err)
			}
		})
	}
}

func TestTrainDictionary(t *testing.T) {
	doc := datasets.Employees(200)
	var samples [][]byte
	for i := 0; i+1000 <= len(doc); i += 1000 {
		samples = append(samples, doc[i:i+1000])
	}
	d, err := zstd.TrainDictionarySize(77, samples, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := zstd.DictID(d); err != nil || id != 77 || len(d) > 4096+1024 {
		t.Fatalf("DictID = %d, %v; %d bytes", id, err, len(d))
	}
	enc, _ := zstd.New(zstd.WithEncoderDictionary(d))
	dec, _ := zstd.New(zstd.WithDictionaries(d))
	src := datasets.Employees(1)
	e, _ := enc.Encode(nil, src, encoding.Binding{})
	if got, err := dec.Decode(nil, e, enc.Params(), encoding.Binding{}, len(src)); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("round trip: %v", err)
	}
	tests := []struct {
		name    string
		id      uint32
		samples [][]byte
		size    int
	}{
		{"ID 0", 0, samples, zstd.DictSize},
		{"no samples", 1, nil, zstd.DictSize},
		{"dictionary too small", 1, samples, 255},
		{"dictionary too large", 1, samples, zstd.MaxDictSize + 1},
		{"nothing repeated", 1, [][]byte{[]byte("one sample")}, zstd.DictSize},
	}
	for _, tt := range tests {
		if _, err := zstd.TrainDictionarySize(tt.id, tt.samples, tt.size); !errors.Is(err, encoding.ErrBadOption) {
			t.Errorf("%s: %v, want %v", tt.name, err, encoding.ErrBadOption)
		}
	}
}
