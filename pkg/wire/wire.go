// Package wire reads and writes JXTA's binary message format,
// application/x-jxta-msg, as JXSE 2.7's WireFormatMessageBinary does.
//
// It sits between the message model (package message) and every transport:
// the endpoint layer frames these bytes on libp2p streams, and the CLI
// reads and writes them on stdio.
//
// # Format
//
// All integers are big-endian. A message is
//
//	"jxmg" version:u8(=0) nsCount:i16 { len:i16 utf8 }*nsCount elemCount:i16 element*
//
// where namespace IDs 0 and 1 stand for the implicit namespaces "" and
// "jxta", and the declared ones follow from 2. An element is
//
//	"jxel" nsID:u8 flags:u8 nameLen:i16 name [typeLen:i16 type] dataLen:i32 data [signature element]
//
// with flag 0x01 when a MIME type is present (it is omitted for
// application/octet-stream), 0x04 when a signature element follows, and
// 0x02 (content encoding) reserved and ignored, as JXSE does. An element
// count of zero means "elements until end of input".
//
// # Byte-exact output
//
// JXSE numbers the namespaces in the iteration order of the java.util.HashMap
// that holds them, not in order of appearance. The encoder reproduces that
// order (String.hashCode, HashMap's spreading, table growth and bucket
// order), so for the same elements it writes the same bytes as JXSE. The one
// case it does not model is a HashMap bin turned into a tree, which needs
// nine namespaces colliding in one bucket of a table of 64 or more slots;
// such a message is still valid, only numbered differently.
// MIME types are written in the canonical form JXSE gives them (see
// message.CanonicalMIME).
//
// # Safety
//
// Decoding enforces Limits before allocating: a length field is checked
// against the remaining budget and, when the input's size is unknown,
// memory for a large element grows with the bytes actually received, so a
// lying length field costs an error, not an allocation. Strings must be
// valid UTF-8 (JXSE would silently replace bad sequences; we refuse them).
package wire

import (
	"errors"
	"fmt"
	"math"
)

// MIMEType is the media type of the format.
const MIMEType = "application/x-jxta-msg"

// Version is the only message version JXSE 2.7 writes and reads.
const Version = 0

// Limits of the format itself.
const (
	// MaxStringLen is the longest name, namespace or MIME type: JXSE reads
	// string lengths as signed 16-bit values.
	MaxStringLen = math.MaxInt16
	// MaxElements is the largest element count JXSE can read back.
	MaxElements = math.MaxInt16
	// MaxNamespaces is the largest number of declared namespaces JXSE
	// accepts, besides the implicit "" and "jxta".
	MaxNamespaces = 253
	// MaxElementSize is the largest element JXSE can read (signed 32 bits).
	MaxElementSize = math.MaxInt32
)

const (
	flagHasType      = 0x01
	flagHasEncoding  = 0x02
	flagHasSignature = 0x04
)

var (
	msgMagic  = [4]byte{'j', 'x', 'm', 'g'}
	elemMagic = [4]byte{'j', 'x', 'e', 'l'}
)

// Sentinel errors; every error this package returns wraps one of them.
var (
	// ErrMalformed: the bytes are not a valid binary JXTA message
	// (truncated, wrong signature, undefined namespace, bad string ...).
	ErrMalformed = errors.New("wire: malformed message")
	// ErrVersion: the message has a version other than 0.
	ErrVersion = errors.New("wire: unsupported message version")
	// ErrLimit: the message exceeds a configured limit.
	ErrLimit = errors.New("wire: message exceeds limit")
	// ErrUnencodable: the message cannot be written in this format
	// (a string too long, too many elements or namespaces, invalid UTF-8,
	// an invalid MIME type, a signature in a namespace not its element's;
	// a nil message).
	ErrUnencodable = errors.New("wire: message cannot be encoded")
	// ErrTrailingData: Unmarshal found bytes after the message.
	ErrTrailingData = errors.New("wire: trailing data after message")
)

// Error reports where and why decoding or encoding failed. It unwraps to one
// of the sentinels and, when there is one, to the underlying cause (for a
// truncated message, io.ErrUnexpectedEOF).
type Error struct {
	Offset int64  // byte offset in the message, -1 when encoding
	Field  string // what was being read or written
	Err    error  // the sentinel
	Cause  error  // underlying error, may be nil
	Detail string // extra explanation, may be empty
}

func (e *Error) Error() string {
	s := e.Err.Error()
	if e.Offset >= 0 {
		s += fmt.Sprintf(" at byte %d", e.Offset)
	}
	if e.Field != "" {
		s += " (" + e.Field + ")"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns the sentinel and the cause.
func (e *Error) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Cause}
	}
	return []error{e.Err}
}
