package cli

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Text from the network — element names, namespaces, MIME types, element
// bodies, reasons a peer gives and errors quoting any of them — reaches a
// terminal only through these functions, so that a peer cannot move the
// cursor, rewrite a line, set the window title or reorder text with
// bidirectional overrides.

// printableLine makes s safe to print as (part of) one line: control
// characters (newlines and tabs too), Unicode format characters (such as
// the bidirectional overrides U+202A–U+202E and U+2066–U+2069),
// characters that are not graphic, bytes that are not UTF-8 and the
// backslash itself are written as Go escapes (\x1b, \n, \u202e, \\), so
// what is printed says exactly what was received.
func printableLine(s string) string {
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		writeSafe(&b, r, s[i], n)
		i += n
	}
	return b.String()
}

// printableText is printableLine for a multi-line text body: newlines,
// tabs and backslashes are kept (CRLF line ends become newlines),
// everything else as printableLine escapes it.
func printableText(s string) string {
	if isPlain(s) {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == '\n' || r == '\t' || r == '\\' {
			b.WriteRune(r)
		} else {
			writeSafe(&b, r, s[i], n)
		}
		i += n
	}
	return b.String()
}

// isPlain reports whether s is printable ASCII without backslashes: the
// common case, returned as it is.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '\\' {
			return false
		}
	}
	return true
}

func writeSafe(b *strings.Builder, r rune, first byte, n int) {
	switch {
	case r == utf8.RuneError && n == 1:
		fmt.Fprintf(b, `\x%02x`, first)
	case r == '\\':
		b.WriteString(`\\`)
	case r == '\n':
		b.WriteString(`\n`)
	case r == '\t':
		b.WriteString(`\t`)
	case r < 0x80 && unicode.IsControl(r):
		fmt.Fprintf(b, `\x%02x`, r)
	case !unicode.IsGraphic(r) || unicode.Is(unicode.Cf, r):
		if r > 0xffff {
			fmt.Fprintf(b, `\U%08x`, r)
		} else {
			fmt.Fprintf(b, `\u%04x`, r)
		}
	default:
		b.WriteRune(r)
	}
}

// jsonSafe escapes, inside JSON text that encoding/json wrote, the
// characters it leaves raw that a terminal may act on: C1 controls
// (U+0080–U+009F, U+009B being a one-character CSI), format characters
// and other non-graphic runes. They can only occur inside strings, where
// \uXXXX means the same character, so the JSON's meaning is unchanged.
func jsonSafe(js []byte) []byte {
	clean := true
	for _, c := range js {
		if c >= 0x80 {
			clean = false
			break
		}
	}
	if clean {
		return js
	}
	out := make([]byte, 0, len(js)+16)
	for i := 0; i < len(js); {
		r, n := utf8.DecodeRune(js[i:])
		if r >= 0x80 && (!unicode.IsGraphic(r) || unicode.Is(unicode.Cf, r)) && !(r == utf8.RuneError && n == 1) {
			if r > 0xffff {
				hi, lo := utf16.EncodeRune(r)
				out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
			} else {
				out = fmt.Appendf(out, `\u%04x`, r)
			}
		} else {
			out = append(out, js[i:i+n]...)
		}
		i += n
	}
	return out
}
