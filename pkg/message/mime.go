package message

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrMIME is the sentinel for media types JXSE cannot parse.
var ErrMIME = errors.New("message: invalid MIME type")

// MIMEError describes an invalid media type. It unwraps to ErrMIME.
type MIMEError struct {
	MIME   string // the offending input
	Offset int    // byte offset of the problem, or -1
	Reason string
}

func (e *MIMEError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("message: invalid MIME type %q at byte %d: %s", e.MIME, e.Offset, e.Reason)
	}
	return fmt.Sprintf("message: invalid MIME type %q: %s", e.MIME, e.Reason)
}

func (e *MIMEError) Unwrap() error { return ErrMIME }

// mimeTerminator marks the bytes that end a MIME token: controls, space and
// RFC 2045 tspecials, exactly JXSE's MimeMediaType "terminator" set. Every
// such byte is ASCII, so scanning UTF-8 bytes decides as JXSE does on chars.
var mimeTerminator = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t[0x7f] = true
	for _, c := range []byte(" ()<>@,;:\\\"/[]?=") {
		t[c] = true
	}
	return t
}()

func findSeparator(s string, from int) int {
	for i := from; i < len(s); i++ {
		if mimeTerminator[s[i]] {
			return i
		}
	}
	return -1
}

// javaTrim strips what java.lang.String.trim strips: every char <= U+0020.
func javaTrim(s string) string {
	i, j := 0, len(s)
	for i < j && s[i] <= ' ' {
		i++
	}
	for j > i && s[j-1] <= ' ' {
		j--
	}
	return s[i:j]
}

func appendLower(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			// Rare: non-ASCII in a type token. Go's Unicode mapping agrees
			// with Java's Locale.US mapping except for a few special cases
			// (dotted capital I, final sigma).
			return append(dst, strings.ToLower(s)...)
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// CanonicalMIME returns the form in which JXSE 2.7 writes the media type s
// (what net.jxta.document.MimeMediaType's toString gives for it): type,
// subtype and parameter names lower-cased, blanks and comments dropped,
// parameter values quoted only when they must be. It rejects what JXSE
// rejects. The empty string stands for application/octet-stream.
//
// Input that is already canonical is returned as is, without allocating.
func CanonicalMIME(s string) (string, error) {
	if s == "" {
		return OctetStream, nil
	}
	if !utf8.ValidString(s) {
		return "", &MIMEError{MIME: s, Offset: -1, Reason: "not valid UTF-8"}
	}
	var buf [128]byte
	out, err := appendCanonicalMIME(buf[:0], s)
	if err != nil {
		return "", err
	}
	if string(out) == s {
		return s, nil
	}
	return string(out), nil
}

// IsOctetStream reports whether s denotes application/octet-stream without
// parameters, the type the wire format leaves unwritten.
func IsOctetStream(s string) bool {
	if s == "" || s == OctetStream {
		return true
	}
	c, err := CanonicalMIME(s)
	return err == nil && c == OctetStream
}

func appendCanonicalMIME(out []byte, s string) ([]byte, error) {
	bad := func(off int, reason string) ([]byte, error) {
		return nil, &MIMEError{MIME: s, Offset: off, Reason: reason}
	}
	lead := len(s) - len(strings.TrimLeft(s, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f "))
	cleaned := javaTrim(s)
	if cleaned == "" {
		return bad(-1, "empty")
	}
	slash := findSeparator(cleaned, 0)
	if slash <= 0 || cleaned[slash] != '/' {
		return bad(lead+max(slash, 0), "expected type/subtype")
	}
	out = appendLower(out, cleaned[:slash])
	out = append(out, '/')
	end := findSeparator(cleaned, slash+1)
	params := ""
	sub := cleaned[slash+1:]
	if end >= 0 {
		sub = cleaned[slash+1 : end]
		params = cleaned[end:]
	}
	if sub == "" {
		return bad(lead+slash+1, "empty subtype")
	}
	out = appendLower(out, sub)
	if params == "" {
		return out, nil
	}
	base := lead + end

	const (
		inSeparator = iota
		inComment
		inAttribute
		inValue
	)
	state := inSeparator
	var attr string
	var val []byte
	var valBuf [64]byte
	quoted, escaped := false, false
	emit := func() {
		out = append(out, ';')
		out = appendLower(out, attr)
		out = append(out, '=')
		out = appendParamValue(out, val)
	}
	for i := 0; i < len(params); {
		c := params[i]
		switch state {
		case inSeparator:
			if c == '(' {
				state = inComment
			} else if c != ' ' && c != '\t' && c != ';' {
				state = inAttribute
				continue // look at c again as the attribute's first byte
			}
		case inComment:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == ')':
				state = inSeparator
			case c == '\r':
				return bad(base+i, "carriage return in comment")
			}
		case inAttribute:
			eq := findSeparator(params, i)
			if eq < 0 || params[eq] != '=' || eq == i {
				return bad(base+i, "malformed parameter")
			}
			attr = params[i:eq]
			i = eq // the '=' is skipped below
			state = inValue
			quoted, escaped = false, false
			val = valBuf[:0]
		case inValue:
			switch {
			case quoted && escaped:
				val = append(val, c)
				escaped = false
			case quoted && c == '\\':
				escaped = true
			case quoted && c == '"':
				quoted = false
			case quoted && c == '\r':
				return bad(base+i, "carriage return in quoted value")
			case quoted, !mimeTerminator[c]:
				val = append(val, c)
			case c == '"':
				quoted = true
			default:
				emit()
				state = inSeparator
				continue // the terminator is looked at again as a separator
			}
		}
		i++
	}
	if state == inValue {
		if escaped || quoted {
			return bad(len(s)-1, "unterminated quoted value")
		}
		emit()
		state = inSeparator
	}
	if state != inSeparator {
		return bad(len(s)-1, "unterminated comment")
	}
	return out, nil
}

func appendParamValue(out, val []byte) []byte {
	needsQuote := false
	for _, c := range val {
		if mimeTerminator[c] {
			needsQuote = true
			break
		}
	}
	if !needsQuote {
		return append(out, val...)
	}
	out = append(out, '"')
	for _, c := range val {
		if c == '\\' || c == '"' || c == '\r' {
			out = append(out, '\\')
		}
		out = append(out, c)
	}
	return append(out, '"')
}
