// Package zstd is the Zstandard codec of p2pmsg's encoding layer, built on
// pkg/encoding and github.com/klauspost/compress/zstd, with optional shared
// dictionaries identified by their dictionary ID.
package zstd

import (
	"fmt"

	kzstd "github.com/klauspost/compress/zstd"

	"github.com/p2pmsg/p2pmsg/internal/specfactory"
	"github.com/p2pmsg/p2pmsg/internal/zstddec"
	"github.com/p2pmsg/p2pmsg/internal/zstdenc"
	"github.com/p2pmsg/p2pmsg/internal/zstdframe"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// Name is the codec's registered name.
const Name = "zstd"

// Levels are zstd's own 1..22, mapped onto the encoder's four speeds
// (fastest, default, better, best) as klauspost/compress does.
const (
	minLevel     = 1
	maxLevel     = 22
	defaultLevel = 3
	// defaultMaxDecodedSize bounds any one decode, whatever the caller's
	// limit; the decoder's 64 GiB default is never used.
	defaultMaxDecodedSize = 64 << 20
)

// Codec compresses with zstd. It is safe for concurrent use, and
// concurrent Encodes run in parallel, each on an encoder of its own
// (internal/zstdenc): a codec holds as many encoders as it was asked to
// run at once, up to GOMAXPROCS.
type Codec struct {
	level   int
	dictID  uint32 // the dictionary Encode uses, 0 for none
	dicts   [][]byte
	maxDec  uint64
	enc     *zstdenc.Encoder
	dec     *zstddec.Pool
	dictIDs map[uint32]bool
}

var _ encoding.Codec = (*Codec)(nil)

// Option configures a Codec.
type Option func(*Codec) error

// WithLevel sets the level, 1 (fastest) to 22 (best). Default: 3.
func WithLevel(l int) Option {
	return func(c *Codec) error {
		if l < minLevel || l > maxLevel {
			return specfactory.LevelError(Name, l, minLevel, maxLevel)
		}
		c.level = l
		return nil
	}
}

// WithDictionaries makes the given zstd dictionaries (in the zstd
// dictionary format, with their IDs) available to Decode. Default: none.
func WithDictionaries(dicts ...[]byte) Option {
	return func(c *Codec) error {
		for _, d := range dicts {
			id, err := dictIDOf(d)
			if err != nil {
				return err
			}
			c.dictIDs[id] = true
			c.dicts = append(c.dicts, d)
		}
		return nil
	}
}

// WithEncoderDictionary makes Encode compress with dict (also made
// available to Decode); its ID is recorded in each header. Default: none.
func WithEncoderDictionary(dict []byte) Option {
	return func(c *Codec) error {
		id, err := dictIDOf(dict)
		if err != nil {
			return err
		}
		c.dictID = id
		return WithDictionaries(dict)(c)
	}
}

// WithMaxDecodedSize bounds the decoder's memory, 1 byte to 1 GiB.
// Default: 64 MiB.
func WithMaxDecodedSize(n int) Option {
	return func(c *Codec) error {
		if n < 1 || n > 1<<30 {
			return fmt.Errorf("%w: zstd max decoded size %d", encoding.ErrBadOption, n)
		}
		c.maxDec = uint64(n)
		return nil
	}
}

// dictIDOf returns the ID of a zstd-format dictionary.
func dictIDOf(dict []byte) (uint32, error) {
	if len(dict) < 8 || dict[0] != 0x37 || dict[1] != 0xA4 || dict[2] != 0x30 || dict[3] != 0xEC {
		return 0, fmt.Errorf("%w: not a zstd dictionary", encoding.ErrBadOption)
	}
	id := uint32(dict[4]) | uint32(dict[5])<<8 | uint32(dict[6])<<16 | uint32(dict[7])<<24
	if id == 0 {
		return 0, fmt.Errorf("%w: zstd dictionary ID 0", encoding.ErrBadOption)
	}
	return id, nil
}

// New returns a zstd codec.
func New(opts ...Option) (*Codec, error) {
	c := &Codec{level: defaultLevel, maxDec: defaultMaxDecodedSize, dictIDs: map[uint32]bool{}}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	eopts := []kzstd.EOption{
		kzstd.WithEncoderLevel(kzstd.EncoderLevelFromZstd(c.level)),
		kzstd.WithEncoderCRC(true),
	}
	// Decoders are built as decodes run at once (zstddec), each loading
	// the dictionaries (tens of KB each); a receiver decoding one element
	// at a time has one.
	dopts := []kzstd.DOption{
		kzstd.WithDecoderMaxMemory(c.maxDec),
		kzstd.WithDecoderMaxWindow(min(c.maxDec, 64<<20)),
		// DecodeAll stops at cap(dst): Decode sets it to the caller's max.
		kzstd.WithDecodeAllCapLimit(true),
	}
	if len(c.dicts) > 0 {
		dopts = append(dopts, kzstd.WithDecoderDicts(c.dicts...))
	}
	prefix := 0 // the dictionary content a match may reach into
	if c.dictID != 0 {
		for _, d := range c.dicts {
			if id, _ := dictIDOf(d); id == c.dictID {
				eopts = append(eopts, kzstd.WithEncoderDict(d))
				if info, err := kzstd.InspectDictionary(d); err == nil {
					prefix = info.ContentSize()
				} else {
					prefix = len(d)
				}
			}
		}
	}
	var err error
	if c.enc, err = zstdenc.New(prefix, eopts...); err != nil {
		return nil, fmt.Errorf("%w: %w", encoding.ErrBadOption, err)
	}
	if c.dec, err = zstddec.New(dopts...); err != nil {
		return nil, fmt.Errorf("%w: %w", encoding.ErrBadOption, err)
	}
	return c, nil
}

func init() {
	c, _ := New()
	_ = encoding.Register(c)
	_ = encoding.RegisterFactory(Name, Factory())
	_ = encoding.RegisterModelFormat(Name, dictMagic, func() encoding.ModelLoader { return &dictLoader{} })
}

// Factory returns the factory that builds zstd codecs from specs,
// zstd[:level][@dictID], with opts (dictionaries, limits) applied first.
// A spec's model is a dictionary ID in decimal (zstd:19@225, as
// encoding.Header.Spec writes it): Encode compresses with the dictionary of
// that ID among those opts give, and building fails with
// encoding.ErrNoDictionary if there is none. The default registry's
// factory is Factory(), which has no dictionaries; give them with
// encoding.WithFactory(zstd.Name, zstd.Factory(zstd.WithDictionaries(…))).
func Factory(opts ...Option) encoding.Factory {
	return specfactory.New(Name, New, opts, WithLevel, encodeWith)
}

// encodeWith makes Encode compress with the dictionary of that ID, given
// by an earlier option.
func encodeWith(id uint32) Option {
	return func(c *Codec) error {
		if !c.dictIDs[id] {
			return fmt.Errorf("%w: zstd dictionary %d", encoding.ErrNoDictionary, id)
		}
		c.dictID = id
		return nil
	}
}

// Name returns "zstd".
func (c *Codec) Name() string { return Name }

// Kind returns encoding.KindCompression.
func (c *Codec) Kind() encoding.Kind { return encoding.KindCompression }

// Params records the level and the dictionary ID.
func (c *Codec) Params() encoding.Params { return encoding.Params{Level: c.level, DictID: c.dictID} }

// Encode appends a zstd frame (with content size and checksum) to dst.
func (c *Codec) Encode(dst, src []byte, _ encoding.Binding) ([]byte, error) {
	return c.enc.EncodeAll(src, dst), nil
}

// Decode appends the decompressed frame to dst. The payload must be
// exactly one ordinary frame (skippable frames, further frames and
// trailing bytes are refused with ErrCorrupt). The frame's content size
// is checked against max, or the codec's own limit (WithMaxDecodedSize)
// when lower, before decoding, and a dictionary the header names
// but this codec lacks fails with ErrNoDictionary. It makes room for no
// more than the frame's blocks can hold (zstdframe), whatever the frame or
// the caller's header claims.
func (c *Codec) Decode(dst, src []byte, p encoding.Params, _ encoding.Binding, max int) ([]byte, error) {
	if p.DictID != 0 && !c.dictIDs[p.DictID] {
		return dst, fmt.Errorf("%w: zstd dictionary %d", encoding.ErrNoDictionary, p.DictID)
	}
	// The codec's own limit (WithMaxDecodedSize) bounds every decode, so
	// that a frame recording more is refused before room is made for it.
	if uint64(max) > c.maxDec {
		max = int(c.maxDec)
	}
	// Exactly one ordinary frame: a skippable frame, another frame or
	// trailing bytes would make the decoder work for output nobody
	// budgeted.
	f, err := zstdframe.Check(src)
	if err != nil {
		return dst, fmt.Errorf("%w: %w", encoding.ErrCorrupt, err)
	}
	if f.DictionaryID != 0 && !c.dictIDs[f.DictionaryID] {
		return dst, fmt.Errorf("%w: zstd dictionary %d", encoding.ErrNoDictionary, f.DictionaryID)
	}
	if f.HasFCS && f.FrameContentSize > uint64(max) {
		return dst, fmt.Errorf("%w: frame holds %d bytes, limit %d", encoding.ErrTooLarge, f.FrameContentSize, max)
	}
	// Room for exactly the frame's content size (which Check found its
	// blocks can hold), or, when the frame does not record it, for what
	// its blocks can hold within max; the decoder stops at the room
	// (WithDecodeAllCapLimit), within one block.
	room := max
	if f.HasFCS {
		room = int(f.FrameContentSize)
	} else if f.MaxSize < uint64(max) {
		room = int(f.MaxSize)
	}
	if cap(dst)-len(dst) >= room {
		dst = dst[: len(dst) : len(dst)+room]
	} else {
		grown := make([]byte, len(dst), len(dst)+room)
		copy(grown, dst)
		dst = grown
	}
	start := len(dst)
	out, err := c.dec.DecodeAll(src, dst)
	if err != nil {
		if room == max && (len(out)-start > max || err == kzstd.ErrDecoderSizeExceeded) {
			return dst[:start], fmt.Errorf("%w: %w", encoding.ErrTooLarge, err)
		}
		return dst[:start], fmt.Errorf("%w: %w", encoding.ErrCorrupt, err)
	}
	if len(out)-start > max {
		return dst[:start], fmt.Errorf("%w: %d > %d", encoding.ErrTooLarge, len(out)-start, max)
	}
	return out, nil
}
