// Package xmlc is the XML-aware codec of p2pmsg's encoding layer,
// registered as "xml". It builds on pkg/encoding and
// github.com/klauspost/compress/zstd.
//
// In the manner of XMill it separates a document's structure from its
// content: a structure stream and one container per path (the text of
// /a/b, the values of /a/b/@id). The structure is a sequence of runs, the
// markup between one value and the next (tags as indexes into a path tree,
// attribute layouts, whitespace, comments, processing instructions,
// DOCTYPE); each distinct run is sent once and then referred to by number,
// so a record-shaped document's structure costs about a byte per value and
// a decoder renders each run once and then copies it. Each container is coded the way that
// suits it: values that share a shape (the text around their digit groups,
// as in "977-2271" or "1996-07-04T00:00:00+02:00") become a shape index
// and one column per digit group, each column frame-of-reference or
// delta bit-packed, byte- or dictionary-coded, whichever is smallest;
// other values are kept raw. The structure, the dictionaries and the
// byte-coded columns are then compressed together with zstd; packed
// columns, already dense, are not.
//
// Decoding is byte-exact for every well-formed document: whitespace,
// comments, processing instructions, CDATA sections, entity and character
// references, namespaces, attribute order and quoting, the XML declaration
// and DOCTYPE all come back as they were. Input the XML model does not
// take (not well-formed, or not XML at all) is compressed with zstd inside
// the same payload, or stored; Encode never fails.
//
// A shared Model (sample documents both peers hold, identified by an ID
// recorded as the header's dictionary ID, like a zstd dictionary) primes
// both sides with the samples' paths, names and value shapes and a zstd
// dictionary of their coded form, so a one-record document costs a few
// tens of bytes. A receiver without the model fails with an error wrapping
// encoding.ErrNoDictionary.
//
// Query returns the values at a simple path (/a/b, /a/b/@id) from a
// payload without rebuilding the document: it replays the structure and
// decodes only the container at that path.
//
// # Payload
//
//	mode     1 byte: 0 stored, 1 zstd, 2 XML (main stream zstd), 3 XML
//	         (main stream raw); +0x80 when primed with a model
//	stored:  the input
//	zstd:    zstd frame (recording its content size and checksum)
//	         without its magic number
//	XML:     uvarint size, CRC-32C of the document (4 bytes, little
//	         endian), uvarint main length, main stream, packed columns
//
// The main stream holds the section lengths, the structure (run
// references and first definitions), the new names, whitespace strings and
// misc items (NUL-terminated), then each container in order of first use: its value count, then either its raw
// values (NUL-terminated) or its new shapes, the shape of each value and
// its columns. Decoding checks the recorded size against the caller's
// limit before allocating, bounds every count by the bytes that could
// hold it, and stops as soon as output passes the recorded size.
package xmlc

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
	"weak"

	kzstd "github.com/klauspost/compress/zstd"

	"github.com/p2pmsg/p2pmsg/internal/specfactory"
	"github.com/p2pmsg/p2pmsg/internal/zstddec"
	"github.com/p2pmsg/p2pmsg/internal/zstdenc"
	"github.com/p2pmsg/p2pmsg/internal/zstdframe"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
)

// Name is the codec's registered name.
const Name = "xml"

// Levels choose how hard zstd works on the main stream and on input that
// is not XML: 1 fastest, 2 default, 3 better, 4 best.
const (
	minLevel     = 1
	maxLevel     = 4
	defaultLevel = 3
	// defaultMaxDecodedSize bounds any one decode, whatever the caller's
	// limit.
	defaultMaxDecodedSize = 64 << 20
)

// smallInput is the size up to which Encode also tries plain zstd at its
// best level and keeps whichever is smaller; below tinyInput, without a
// model, plain zstd always wins (the names and markup an XML coding must
// spell out once cost more than zstd spends), so it is the only try.
const (
	smallInput = 4 << 10
	tinyInput  = 1 << 10
)

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Codec is the XML codec. It is safe for concurrent use, and concurrent
// Encodes run in parallel: its tokenizer state is pooled, and its zstd
// stage takes an encoder of its own per encode (internal/zstdenc), up to
// GOMAXPROCS.
type Codec struct {
	level  int
	model  *Model // Encode primes with it; nil for none
	models map[uint32]*Model
	maxDec int

	encMain   *zstdenc.Encoder         // main stream, no dictionary
	encModel  *zstdenc.Encoder         // main stream with the model's dictionary
	encSmall  *zstdenc.Encoder         // non-XML input up to smallInput, best level
	encLarge  *zstdenc.Encoder         // larger non-XML input, at the level
	dec       *zstddec.Pool            // shared by the codecs of its maxDec
	modelDecs map[uint32]*zstddec.Pool // per model, shared likewise (Model.decoders)
	encoders  sync.Pool
	decoders  sync.Pool
	zbuf      sync.Pool
	forceXML  bool // tests: keep the XML coding even when larger
	rawMain   bool // tests: store the main stream uncompressed
}

var _ encoding.Codec = (*Codec)(nil)

// Option configures a Codec.
type Option func(*Codec) error

// WithLevel sets the level, 1 (fastest) to 4 (best). Default: 3.
func WithLevel(l int) Option {
	return func(c *Codec) error {
		if l < minLevel || l > maxLevel {
			return specfactory.LevelError(Name, l, minLevel, maxLevel)
		}
		c.level = l
		return nil
	}
}

// WithModels makes models available to Decode and Query (by their IDs).
// Default: none.
func WithModels(models ...*Model) Option {
	return func(c *Codec) error {
		for _, m := range models {
			if m == nil {
				return fmt.Errorf("%w: nil xml model", encoding.ErrBadOption)
			}
			c.models[m.id] = m
		}
		return nil
	}
}

// WithEncoderModel makes Encode prime with m (and makes it available to
// Decode); its ID is recorded as the dictionary ID. Default: none.
func WithEncoderModel(m *Model) Option {
	return func(c *Codec) error {
		if m == nil {
			return fmt.Errorf("%w: nil xml model", encoding.ErrBadOption)
		}
		c.model = m
		return WithModels(m)(c)
	}
}

// WithMaxDecodedSize bounds the decoder's output, 1 byte to 1 GiB.
// Default: 64 MiB.
func WithMaxDecodedSize(n int) Option {
	return func(c *Codec) error {
		if n < 1 || n > 1<<30 {
			return fmt.Errorf("%w: xml max decoded size %d", encoding.ErrBadOption, n)
		}
		c.maxDec = n
		return nil
	}
}

var zstdLevels = [...]kzstd.EncoderLevel{
	1: kzstd.SpeedFastest, 2: kzstd.SpeedDefault, 3: kzstd.SpeedBetterCompression, 4: kzstd.SpeedBestCompression,
}

// New returns an XML codec.
func New(opts ...Option) (*Codec, error) {
	c := &Codec{level: defaultLevel, maxDec: defaultMaxDecodedSize, models: map[uint32]*Model{}}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	eopts := func(l kzstd.EncoderLevel, crc bool, extra ...kzstd.EOption) []kzstd.EOption {
		return append([]kzstd.EOption{
			kzstd.WithEncoderLevel(l),
			kzstd.WithEncoderCRC(crc),
			kzstd.WithSingleSegment(true), // always records the content size
		}, extra...)
	}
	var err error
	// Encoders by input size (zstdenc): the main stream and larger
	// non-XML input are as large as the documents. Each encodes on as
	// many goroutines at once as the codec's callers use (zstdenc).
	mk := func(prefix int, o []kzstd.EOption) *zstdenc.Encoder {
		if err != nil {
			return nil
		}
		var e *zstdenc.Encoder
		e, err = zstdenc.New(prefix, o...)
		return e
	}
	c.encMain = mk(0, eopts(zstdLevels[c.level], false))
	// encSmall never looks back further than its input: a window that
	// size gives the same bytes as the level's 8 MiB window, and spares
	// allocating and resetting the rest.
	if err == nil {
		c.encSmall, err = zstdenc.NewFixed(eopts(kzstd.SpeedBestCompression, true, kzstd.WithWindowSize(smallInput), kzstd.WithLowerEncoderMem(true))...)
	}
	c.encLarge = mk(0, eopts(zstdLevels[c.level], true))
	if c.model != nil {
		c.encModel = mk(len(c.model.dict), eopts(zstdLevels[c.level], false, kzstd.WithEncoderDictRaw(0, c.model.dict)))
	}
	if err == nil {
		c.dec, err = plainDecoders.get(c.maxDec, nil)
	}
	c.modelDecs = map[uint32]*zstddec.Pool{}
	for id, m := range c.models {
		if err == nil {
			c.modelDecs[id], err = m.decoders.get(c.maxDec, m.dict)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", encoding.ErrBadOption, err)
	}
	c.encoders.New = func() any { return newEncoder() }
	c.decoders.New = func() any { return new(decoder) }
	return c, nil
}

// decoderPools holds the zstd decoders of one dictionary (or none), one
// pool per decoded-size limit, shared by every codec built with both while
// any holds it: a decoder keeps nothing of a frame once it has decoded it
// (zstddec), so codecs, and the receivers holding them, need not each have
// their own; a pool no codec holds goes, as a codec's decoders went with
// it. Limits are the codecs' options, not peers', so there are few.
type decoderPools struct {
	mu    sync.Mutex
	pools map[int]weak.Pointer[zstddec.Pool]
}

// plainDecoders are the decoders without a dictionary.
var plainDecoders decoderPools

func (p *decoderPools) get(maxDec int, dict []byte) (*zstddec.Pool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if z := p.pools[maxDec].Value(); z != nil {
		return z, nil
	}
	z, err := newZstdDecoders(maxDec, dict)
	if err != nil {
		return nil, err
	}
	if p.pools == nil {
		p.pools = map[int]weak.Pointer[zstddec.Pool]{}
	}
	p.pools[maxDec] = weak.Make(z)
	return z, nil
}

func newZstdDecoders(maxDec int, dict []byte) (*zstddec.Pool, error) {
	o := []kzstd.DOption{
		kzstd.WithDecoderMaxMemory(uint64(mainBound(maxDec))),
		kzstd.WithDecoderMaxWindow(max(1<<10, min(uint64(mainBound(maxDec)), 64<<20))),
		kzstd.WithDecodeAllCapLimit(true),
	}
	if dict != nil {
		o = append(o, kzstd.WithDecoderDictRaw(0, dict))
	}
	return zstddec.New(o...)
}

// mainBound is the largest main stream a document of size bytes may have;
// Encode falls back to plain zstd beyond it, Decode refuses more.
func mainBound(size int) int { return 2*size + 4096 }

func init() {
	c, _ := New()
	_ = encoding.Register(c)
	_ = encoding.RegisterFactory(Name, Factory())
	_ = encoding.RegisterModelFormat(Name, modelMagic, func() encoding.ModelLoader { return &modelLoader{} })
}

// Factory returns the factory that builds XML codecs from specs,
// xml[:level][@modelID], with opts (models, limits) applied first. A
// spec's model is a model ID in decimal (xml:3@225, as encoding.Header.Spec
// writes it): Encode primes with the model of that ID among those opts
// give, and building fails with encoding.ErrNoDictionary if there is
// none. The default registry's factory is Factory(), which has no models;
// give them with encoding.WithFactory(xmlc.Name, xmlc.Factory(xmlc.WithModels(…))).
func Factory(opts ...Option) encoding.Factory {
	return specfactory.New(Name, New, opts, WithLevel, encodeWith)
}

// encodeWith makes Encode prime with the model of that ID, given by an
// earlier option.
func encodeWith(id uint32) Option {
	return func(c *Codec) error {
		m := c.models[id]
		if m == nil {
			return fmt.Errorf("%w: xml model %d", encoding.ErrNoDictionary, id)
		}
		c.model = m
		return nil
	}
}

// Model returns the model Encode primes with, nil for none.
func (c *Codec) Model() *Model { return c.model }

// Name returns "xml".
func (c *Codec) Name() string { return Name }

// Kind returns encoding.KindCompression.
func (c *Codec) Kind() encoding.Kind { return encoding.KindCompression }

// Params records the level and the model's ID (0 for none).
func (c *Codec) Params() encoding.Params {
	p := encoding.Params{Level: c.level}
	if c.model != nil {
		p.DictID = c.model.id
	}
	return p
}

// Encode appends the coding of src to dst. It never fails.
func (c *Codec) Encode(dst, src []byte, _ encoding.Binding) ([]byte, error) {
	start := len(dst)
	if len(src) == 0 {
		return append(dst, modeStored), nil
	}
	var base *state
	zenc := c.encMain
	mode := byte(0)
	if c.model != nil {
		base, zenc, mode = c.model.base, c.encModel, modeModel
	}
	xml := false
	if c.model != nil || len(src) >= tinyInput || c.forceXML {
		e := c.encoders.Get().(*encoder)
		e.reset(src, base)
		if e.scan() {
			e.finish()
			if len(e.main) <= mainBound(len(src)) {
				dst = c.appendXML(dst, src, e, zenc, mode)
				xml = true
			}
		}
		e.src = nil
		c.encoders.Put(e)
	}
	if c.forceXML && xml {
		return dst, nil
	}
	if !xml || len(src) <= smallInput {
		var g []byte
		if xml {
			g = c.appendGeneric(nil, src)
		} else {
			dst = c.appendGeneric(dst, src)
		}
		if g != nil && len(g) < len(dst)-start {
			dst = append(dst[:start], g...)
		}
	}
	if len(dst)-start > len(src) { // incompressible: store
		dst = append(append(dst[:start], modeStored), src...)
	}
	return dst, nil
}

func (c *Codec) appendXML(dst, src []byte, e *encoder, zenc *zstdenc.Encoder, mode byte) []byte {
	zb := c.getBuf()
	z := zenc.EncodeAll(e.main, (*zb)[:0])
	*zb = z
	if len(z) >= len(zstdMagic) && len(z)-len(zstdMagic) < len(e.main) && !c.rawMain {
		z = z[len(zstdMagic):]
		mode |= modeXMLZ
	} else {
		z = e.main
		mode |= modeXMLRaw
	}
	dst = append(dst, mode)
	dst = binary.AppendUvarint(dst, uint64(len(src)))
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(src, castagnoli))
	dst = binary.AppendUvarint(dst, uint64(len(z)))
	dst = append(dst, z...)
	dst = append(dst, e.bw.buf...)
	c.zbuf.Put(zb)
	return dst
}

func (c *Codec) appendGeneric(dst, src []byte) []byte {
	dst = append(dst, modeGeneric)
	at := len(dst)
	if len(src) <= smallInput {
		dst = c.encSmall.EncodeAll(src, dst)
	} else {
		dst = c.encLarge.EncodeAll(src, dst)
	}
	return append(dst[:at], dst[at+len(zstdMagic):]...) // drop the magic number
}

func (c *Codec) getBuf() *[]byte {
	if b, ok := c.zbuf.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

// header is a payload's first fields.
type header struct {
	mode  byte
	model *Model
	size  int    // decoded size
	crc   uint32 // XML modes
	body  []byte // after the fields read
}

// parseHeader reads src's mode and size, checks the size against max and
// finds the model the mode needs.
func (c *Codec) parseHeader(src []byte, p encoding.Params, max int) (header, error) {
	var h header
	if len(src) == 0 {
		return h, corrupt("empty payload")
	}
	h.mode = src[0]
	// A model the header names is needed whether or not the payload
	// turned out to use it, as zstd needs the dictionary a header names:
	// a receiver without it refuses the element the same way every time.
	if p.DictID != 0 && c.models[p.DictID] == nil {
		return h, fmt.Errorf("%w: xml model %d", encoding.ErrNoDictionary, p.DictID)
	}
	if h.mode&modeModel != 0 {
		m := c.models[p.DictID]
		if m == nil {
			return h, fmt.Errorf("%w: xml model %d", encoding.ErrNoDictionary, p.DictID)
		}
		h.model = m
	}
	max = min(max, c.maxDec)
	switch h.mode &^ modeModel {
	case modeStored:
		if h.mode != modeStored {
			return h, corrupt("stored with a model")
		}
		h.size, h.body = len(src)-1, src[1:]
		if h.size > max {
			return h, fmt.Errorf("%w: %d > %d", encoding.ErrTooLarge, h.size, max)
		}
		return h, nil
	case modeGeneric:
		if h.mode != modeGeneric {
			return h, corrupt("zstd with a model")
		}
		// The size is the zstd frame's content size, in its header.
		var zh kzstd.Header
		var buf [4 + kzstd.HeaderMaxSize]byte
		n := copy(buf[copy(buf[:], zstdMagic):], src[1:])
		if err := zh.Decode(buf[:4+n]); err != nil || !zh.HasFCS {
			return h, corrupt("zstd frame header")
		}
		if zh.FrameContentSize > uint64(max) {
			return h, fmt.Errorf("%w: %d > %d", encoding.ErrTooLarge, zh.FrameContentSize, max)
		}
		h.size, h.body = int(zh.FrameContentSize), src[1:]
		return h, nil
	case modeXMLZ, modeXMLRaw:
	default:
		return h, corrupt("mode")
	}
	sz, n := binary.Uvarint(src[1:])
	if n <= 0 {
		return h, corrupt("size")
	}
	if sz > uint64(max) {
		return h, fmt.Errorf("%w: %d > %d", encoding.ErrTooLarge, sz, max)
	}
	h.size, h.body = int(sz), src[1+n:]
	if len(h.body) < 4 {
		return h, corrupt("checksum")
	}
	h.crc = binary.LittleEndian.Uint32(h.body)
	h.body = h.body[4:]
	return h, nil
}

// Decode appends the document src encodes to dst. It fails with
// ErrTooLarge before allocating if the recorded size exceeds max, with
// ErrNoDictionary if p names a model (its DictID) this codec lacks, and
// with ErrCorrupt on anything else amiss.
func (c *Codec) Decode(dst, src []byte, p encoding.Params, _ encoding.Binding, max int) ([]byte, error) {
	h, err := c.parseHeader(src, p, max)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	switch h.mode &^ modeModel {
	case modeStored:
		return append(dst, h.body...), nil
	case modeGeneric:
		return c.decodeGeneric(dst, h)
	}
	d := c.decoders.Get().(*decoder)
	defer c.decoders.Put(d)
	main, packed, err := c.mainStream(d, h)
	if err != nil {
		return dst, err
	}
	var base *state
	if h.model != nil {
		base = h.model.base
	}
	if err := d.parse(main, packed, base); err != nil {
		return dst, err
	}
	// Room for the document, but no more than the input could plausibly
	// expand to: a lying size costs growth only as output appears.
	dst = slices.Grow(dst, min(h.size, 64*len(src)+64<<10))
	out, err := d.walk(dst, h.size)
	if err == errOverflow || (err == nil && len(out)-start != h.size) {
		return dst[:start], corrupt("size differs from the recorded size")
	}
	if err != nil {
		return dst[:start], err
	}
	if crc32.Checksum(out[start:], castagnoli) != h.crc {
		return dst[:start], corrupt("checksum mismatch")
	}
	return out, nil
}

// mainStream returns the main stream (decompressed into d.main if need
// be) and the packed section of an XML payload.
func (c *Codec) mainStream(d *decoder, h header) (main, packed []byte, err error) {
	r := reader{b: h.body}
	n := r.count(len(h.body), "main length")
	body := r.bytes(n, "main stream")
	if r.err != nil {
		return nil, nil, r.err
	}
	packed = h.body[r.p:]
	if h.mode&^modeModel == modeXMLRaw {
		return body, packed, nil
	}
	zd := c.dec
	if h.model != nil {
		zd = c.modelDecs[h.model.id]
	}
	main, d.zin, err = zstdDecode(zd, d.main[:0], d.zin, body, mainBound(h.size), "main stream")
	d.main = main
	return main, packed, err
}

// zstdDecode appends to dst what a magic-less zstd frame holds. The frame
// must record its content size, at most limit and no more than its blocks
// can hold (zstdframe), and decode to exactly that: dst grows by no more
// than the frame can decode to, whatever it claims. zin is scratch for the
// frame with its magic number restored, returned for reuse.
func zstdDecode(zd *zstddec.Pool, dst, zin, frame []byte, limit int, what string) (out, zin2 []byte, err error) {
	full := append(append(zin[:0], zstdMagic...), frame...)
	f, err := zstdframe.Check(full) // one frame, nothing after it
	if err != nil {
		return dst, full, fmt.Errorf("%w: %s: %w", errCorrupt, what, err)
	}
	if !f.HasFCS || f.FrameContentSize > uint64(limit) {
		return dst, full, corrupt(what + " size")
	}
	start, fcs := len(dst), int(f.FrameContentSize)
	dst = slices.Grow(dst, fcs)
	out, err = zd.DecodeAll(full, dst[:start:start+fcs])
	if err != nil {
		return dst[:start], full, fmt.Errorf("%w: %s: %w", errCorrupt, what, err)
	}
	if len(out)-start != fcs {
		return dst[:start], full, corrupt(what + " size")
	}
	return out, full, nil
}

// decodeGeneric appends to dst the document a plain zstd payload holds.
func (c *Codec) decodeGeneric(dst []byte, h header) ([]byte, error) {
	d := c.decoders.Get().(*decoder)
	out, zin, err := zstdDecode(c.dec, dst, d.zin, h.body, h.size, "zstd")
	d.zin = zin
	c.decoders.Put(d)
	return out, err
}
