package encoding

import (
	"slices"
	"strings"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// Selector decides which elements a scheme encodes.
type Selector interface {
	Select(e message.Element) bool
}

// selectorFunc adapts a function to Selector.
type selectorFunc func(e message.Element) bool

// Select calls f.
func (f selectorFunc) Select(e message.Element) bool { return f(e) }

// ByName selects elements with any of the names, in any namespace.
func ByName(names ...string) Selector {
	return selectorFunc(func(e message.Element) bool { return slices.Contains(names, e.Name) })
}

// ByMIME selects elements whose media type (parameters ignored, case
// insensitive; "" counts as application/octet-stream) is one of types.
// A type ending in "/*" matches a whole top-level type, e.g. "text/*".
func ByMIME(types ...string) Selector {
	return selectorFunc(func(e message.Element) bool {
		t := mediaType(stripMark(e.Type()))
		for _, want := range types {
			want = mediaType(want)
			if t == want || strings.HasSuffix(want, "/*") && strings.HasPrefix(t, want[:len(want)-1]) {
				return true
			}
		}
		return false
	})
}

func mediaType(s string) string {
	if i := strings.IndexByte(s, ';'); i >= 0 {
		s = s[:i]
	}
	return strings.ToLower(strings.TrimSpace(s))
}

// isMarked reports whether e was created through a Producer: every
// scheme encodes those, whatever its selector.
func isMarked(e message.Element) bool { return strings.HasSuffix(e.MIME, markParam) }

// markParam is the MIME parameter a Producer appends to mark an element
// for encoding. A scheme removes it when it encodes the element, so the
// receiver gets the original MIME type back.
const markParam = ";x-p2pmsg-encode=1"

func stripMark(mime string) string { return strings.TrimSuffix(mime, markParam) }

// Unmark returns e without the Producer's mark, as a scheme sends an
// element it selected but chose not to encode (the adaptive scheme's
// identity choice). An unmarked element is returned unchanged.
func Unmark(e message.Element) message.Element {
	e.MIME = stripMark(e.MIME)
	return e
}

// Producer creates elements marked for encoding, the paper's element
// producer: elements created through it are selected by every Scheme,
// whatever its selector; others are not. The mark is a MIME
// parameter that the scheme strips; an element sent without a scheme keeps
// it. The zero Producer is ready to use.
type Producer struct{}

// NewElement returns an element marked for encoding.
func (Producer) NewElement(namespace, name, mime string, data []byte) message.Element {
	return message.Element{Namespace: namespace, Name: name, MIME: mime + markParam, Data: data}
}

// Text returns a marked text/plain;charset=UTF-8 element.
func (p Producer) Text(namespace, name, s string) message.Element {
	return p.NewElement(namespace, name, message.TextUTF8, []byte(s))
}

// XML returns a marked text/xml;charset=UTF-8 element.
func (p Producer) XML(namespace, name string, doc []byte) message.Element {
	return p.NewElement(namespace, name, message.XMLUTF8, doc)
}

// IsEncoded reports whether e is an encoded element (one a receiver could
// not decode is delivered this way under DeliverEncoded).
func IsEncoded(e message.Element) bool { return e.MIME == MIME }
