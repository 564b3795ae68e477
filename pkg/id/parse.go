package id

import (
	"errors"
	"fmt"
	"strconv"
)

// Errors. Parse returns a *ParseError that unwraps to one of ErrSyntax,
// ErrFormat, ErrLength and ErrType; test with errors.Is.
var (
	// ErrSyntax: the text is not urn:jxta:<format>-<value>, has a character
	// that does not belong there (a non-hex digit, '%', '#', space), or
	// names no well-known ID (urn:jxta:jxta-Nothing).
	ErrSyntax = errors.New("id: invalid JXTA ID syntax")
	// ErrFormat: a format other than jxta, uuid and cbid (format names are
	// case-sensitive, as in JXSE).
	ErrFormat = errors.New("id: unknown JXTA ID format")
	// ErrLength: a uuid or cbid value with an odd number of hex digits, none,
	// or more than 64 bytes.
	ErrLength = errors.New("id: bad JXTA ID length")
	// ErrType: a uuid or cbid value whose last byte is not a known ID type
	// (01 to 07).
	ErrType = errors.New("id: unknown JXTA ID type")

	// ErrKind: an ID of the wrong kind was passed, such as a pipe ID where
	// a peer group ID is needed.
	ErrKind = errors.New("id: wrong kind of JXTA ID")
	// ErrKey: a public key that cannot be used (nil, or not marshallable).
	ErrKey = errors.New("id: unusable public key")
	// ErrMismatch: a peer ID that is not the one derived from the public key
	// it was checked against.
	ErrMismatch = errors.New("id: peer ID does not match the public key")
)

// ParseError says why and where a string is not a JXTA ID.
type ParseError struct {
	Input  string // the text given to Parse
	Offset int    // byte offset in Input where the problem is
	Reason string // what is wrong, in words
	Err    error  // ErrSyntax, ErrFormat, ErrLength or ErrType
}

func (e *ParseError) Error() string {
	in := e.Input
	if len(in) > 80 {
		in = in[:77] + "..."
	}
	msg := "id: invalid JXTA ID"
	if e.Err != nil {
		msg = e.Err.Error()
	}
	return msg + " " + strconv.Quote(in) + " at byte " + strconv.Itoa(e.Offset) + ": " + e.Reason
}

func (e *ParseError) Unwrap() error { return e.Err }

// Parse reads a JXTA ID written as JXSE writes it (see the package
// documentation for what it accepts). On failure the error is a
// *ParseError.
func Parse(s string) (ID, error) {
	fail := func(off int, err error, reason string) (ID, error) {
		return ID{}, &ParseError{Input: s, Offset: off, Reason: reason, Err: err}
	}
	if !hasPrefixFold(s, "urn:") {
		return fail(0, ErrSyntax, `not a "urn:" URI`)
	}
	if !hasPrefixFold(s[4:], "jxta:") {
		return fail(4, ErrSyntax, `URN namespace is not "jxta"`)
	}
	rest := s[len(prefix):]
	dash := -1
	for i := 0; i < len(rest); i++ {
		if rest[i] == '-' {
			dash = i
			break
		}
	}
	if dash < 0 {
		return fail(len(prefix), ErrSyntax, "no '-' after the ID format")
	}
	format, value := rest[:dash], rest[dash+1:]
	off := len(prefix) + dash + 1 // where value starts
	var f Format
	switch format {
	case "jxta":
		return parseWellKnown(s, off)
	case "uuid":
		f = FormatUUID
	case "cbid":
		f = FormatCBID
	default:
		return fail(len(prefix), ErrFormat, fmt.Sprintf("format %q (want jxta, uuid or cbid)", format))
	}

	for i := 0; i < len(value); i++ {
		if unhex[value[i]] == 0xff {
			return fail(off+i, ErrSyntax, fmt.Sprintf("%q is not a hex digit", value[i]))
		}
	}
	switch {
	case len(value) == 0:
		return fail(off, ErrLength, "no hex value")
	case len(value)%2 != 0:
		return fail(off, ErrLength, fmt.Sprintf("odd number of hex digits (%d)", len(value)))
	case len(value) > 2*(valueLen+1):
		return fail(off+2*(valueLen+1), ErrLength, fmt.Sprintf("%d bytes, more than 64", len(value)/2))
	}
	n := len(value)/2 - 1 // value bytes before the type byte
	id := ID{format: f}
	for i := 0; i < n; i++ {
		id.value[i] = unhex[value[2*i]]<<4 | unhex[value[2*i+1]]
	}
	t := unhex[value[2*n]]<<4 | unhex[value[2*n+1]]
	if t < byte(KindCodat) || t > byte(KindContent) {
		return fail(off+2*n, ErrType, fmt.Sprintf("type byte %02X (want 01 to 07)", t))
	}
	id.kind = Kind(t)
	return canonical(id), nil
}

// canonical applies what JXSE does to a freshly parsed uuid or cbid ID.
func canonical(id ID) ID {
	switch id.kind {
	case KindPeerGroup:
		// A group with the UUID of a well-known group and nothing else is
		// that group (JXSE translateToWellKnown).
		if [valueLen - uuidLen]byte(id.value[uuidLen:]) == ([valueLen - uuidLen]byte{}) {
			switch [uuidLen]byte(id.value[:uuidLen]) {
			case netUUID:
				return NetPeerGroupID
			case worldUUID:
				return WorldPeerGroupID
			}
		}
	case KindContent:
		// JXSE's cbid ContentID inherits the uuid format's getIDFormat.
		id.format = FormatUUID
	}
	return id
}

func parseWellKnown(s string, off int) (ID, error) {
	name := s[off:]
	switch {
	case equalFold(name, "NetGroup"):
		return NetPeerGroupID, nil
	case equalFold(name, "WorldGroup"):
		return WorldPeerGroupID, nil
	case equalFold(name, "Null"):
		return NullID, nil
	}
	return ID{}, &ParseError{Input: s, Offset: off, Err: ErrSyntax,
		Reason: fmt.Sprintf("no well-known ID %q (want NetGroup, WorldGroup or Null)", name)}
}

// MustParse is Parse for IDs known to be valid, such as constants; it
// panics on error.
func MustParse(s string) ID {
	id, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return id
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && equalFold(s[:len(prefix)], prefix)
}

// equalFold compares ASCII case-insensitively, as Java's equalsIgnoreCase
// does for ASCII; non-ASCII bytes must match exactly.
func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// unhex maps ASCII hex digits to their value and everything else to 0xff.
var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, c := range "0123456789" {
		t[c] = byte(i)
	}
	for i, c := range "abcdef" {
		t[c] = byte(10 + i)
		t[c-'a'+'A'] = byte(10 + i)
	}
	return t
}()
