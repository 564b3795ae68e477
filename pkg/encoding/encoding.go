// Package encoding is p2pmsg's encoding layer: it compresses or encrypts
// selected elements of a message and restores them on the receiving side.
//
// It sits above pkg/message (the message model) and below pipes: a Scheme
// turns a message into one whose selected elements are replaced by
// self-describing encoded elements, and back. It is the Go form of the
// Compression Pipe Adapter of Cowan and Kotovskiy (a compression encoding
// scheme, an element producer that marks which elements to encode, and
// selectivity), generalised to any Codec: codecs live in subpackages
// (gzip, deflate, zstd, s2, xmlc, seal) and register themselves in the
// default Registry when imported; this package imports none of them. A
// program imports those it encodes or decodes with, with a blank import
// (import _ "github.com/p2pmsg/p2pmsg/pkg/encoding/zstd") where it names
// them only in specs or receives them: a receiver that imports none
// refuses every encoded element with ErrUnknownCodec.
//
// # Encoded elements
//
// An encoded element keeps its namespace and name, so any JXTA peer still
// parses the message; its MIME type becomes MIME and its data is a compact
// header followed by the codec's payload:
//
//	magic    "P2E"        3 bytes
//	version  1            1 byte
//	codec    uvarint length + name (at most 64 bytes)
//	level    zigzag varint
//	dict ID  uvarint (0: none)
//	key ID   uvarint length + bytes (at most 128 bytes)
//	MIME     uvarint length + original MIME type (at most 256 bytes)
//	size     uvarint original size in bytes
//	payload  the rest
//
// The header is the element's only cleartext metadata; a codec that
// authenticates (seal) binds it, with the element's namespace, name and the
// pipe ID, as associated data.
//
// Encoding twice (compress, then encrypt) nests: the inner encoded element
// is the outer one's payload, so the outer codec hides the inner header.
// Only nesting that means something is accepted, when encoding and when
// decoding: one codec of any kind, or a compression codec then seal
// (Kind). Compressing compressed data, or sealing twice, buys nothing
// and would let a peer multiply the decoder's work.
//
// # Codec specs
//
// A Spec names a configured codec in text, name[:level][@model] (zstd:19,
// xml@employees), and a Chain names the codecs of one element, compress
// then encrypt (zstd:9,seal); ParseSpec and ParseChain are their one
// reader, and String their writer. Each codec package registers a Factory
// that builds its codec from a spec, which NewCodec and NewChain use. What
// a spec does not say (seal's keys, a dictionary's bytes) the caller gives
// with WithFactory: no registered factory holds a key, so seal is built
// only with the caller's.
//
// # Shared models
//
// A trained model (an xml model, a zstd dictionary: xmlc.NewModel,
// zstd.TrainDictionary) is saved as a model file. Models reads such files,
// each recognised by its content among the formats codec packages register
// (RegisterModelFormat), and gives the codecs them: a spec names a model
// by its ID (xml@7, zstd:19@9), the encoded element's header records the
// ID, and a receiver without that model fails with ErrNoDictionary naming
// it.
//
// # Adapters
//
// Output, Input and Bidi wrap anything that sends or receives messages (a
// pipe) with a scheme, as the paper's pipe adapters do: create the adapter,
// take its Producer, create the elements to encode through it, send; the
// receiver's Input hands back the original message.
//
// # Receiver policy
//
// An element that cannot be decoded (unknown codec, corrupt data, failed
// authentication, missing key or dictionary, too large) yields an
// *ElementError naming it. With DropMessage (the default) Decode returns
// that error and no message; with DeliverEncoded the element is delivered
// still encoded (IsEncoded reports it) and the error goes to the
// WithErrorHandler function.
//
// A receiver can require that selected elements arrive sealed, with given
// keys (WithRequireSealed): a plain element, or one protected otherwise,
// then fails with ErrPolicy and the message is refused whatever the
// Policy. A receiver that takes only what a key vouches for says so with
// WithSealedOnly: every element but the transport headers it exempts must
// arrive sealed, a message with no sealed element is refused, and the
// exempt headers are not delivered. Requirements are checked on an
// element's header before it is opened, so an element sealed with another
// key costs no decryption. DecodeReport tells, per element, which codecs
// and key decoded it.
//
// # Limits
//
// Decoding enforces a maximum decoded size per element and per message.
// Every layer counts against the message's budget, not only the element's
// final bytes: the decode work of a message is bounded by its budget
// (WithLimits), whatever its elements nest. The header's recorded size is
// checked before any allocation and charged to the budget as soon as a
// codec is asked to decode the layer, whether it then decodes or fails, so
// a size the payload cannot back spends the budget as an honest one does.
// Codecs are given the recorded size and must stop as soon as output would
// exceed it, so a decompression bomb fails fast with bounded memory, and
// make room only for what their input can hold: a zstd frame no more than
// its blocks can decode to, an s2 block only once its tags add up to its
// length. Codecs refuse input that would make them work without output:
// zstd accepts exactly one ordinary frame (no skippable frames, no
// trailing data), gzip one member, deflate and s2 nothing after their
// stream.
package encoding

import (
	"errors"
	"fmt"
)

// MIME is the media type of an encoded element.
const MIME = "application/x-p2pmsg-encoded"

// Sentinel errors. Errors returned by this package and by codecs wrap one of
// them; use errors.Is.
var (
	ErrUnknownCodec  = errors.New("encoding: unknown codec")
	ErrSpec          = errors.New("encoding: bad codec spec")
	ErrDuplicate     = errors.New("encoding: codec already registered")
	ErrCorrupt       = errors.New("encoding: corrupt data")
	ErrAuth          = errors.New("encoding: authentication failed")
	ErrNoDictionary  = errors.New("encoding: missing dictionary")
	ErrNoKey         = errors.New("encoding: missing key")
	ErrTooLarge      = errors.New("encoding: decoded size exceeds limit")
	ErrBadOption     = errors.New("encoding: invalid option")
	ErrNestedTooDeep = errors.New("encoding: encodings nested too deeply")
	ErrNesting       = errors.New("encoding: codecs nested in a way that means nothing (want compress, seal, or compress then seal)")
	ErrPolicy        = errors.New("encoding: element not protected as the receiver requires")
	ErrReplay        = errors.New("encoding: sealed element replayed")
	ErrUnbound       = errors.New("encoding: sealing needs a pipe ID (or WithoutPipeBinding)")
)

// ElementError reports a failure to encode or decode one element. It
// unwraps to the codec's error, which wraps one of the sentinels.
type ElementError struct {
	Namespace string
	Name      string
	Index     int    // position in the message
	Codec     string // codec name, when known
	Err       error
}

func (e *ElementError) Error() string {
	c := ""
	if e.Codec != "" {
		c = " (codec " + e.Codec + ")"
	}
	return fmt.Sprintf("element %d %q:%q%s: %v", e.Index, e.Namespace, e.Name, c, e.Err)
}

func (e *ElementError) Unwrap() error { return e.Err }
