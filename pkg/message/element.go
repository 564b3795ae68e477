package message

import "bytes"

// Well-known MIME types of elements.
const (
	// OctetStream is the type of an element whose MIME is empty.
	OctetStream = "application/octet-stream"
	// TextUTF8 is the type JXSE gives string elements.
	TextUTF8 = "text/plain;charset=UTF-8"
	// XMLUTF8 is the type JXSE gives XML documents.
	XMLUTF8 = "text/xml;charset=UTF-8"
	// WireMessage is the type of an element that holds a whole binary
	// JXTA message.
	WireMessage = "application/x-jxta-msg"
)

// Element is one named, typed piece of a message.
//
// Elements are small values; copying one copies the reference to Data, not
// the bytes. Data must not be modified once the element is in a message.
type Element struct {
	// Namespace groups elements; "" and "jxta" are implicit in every
	// message, others are declared by the wire format as needed.
	Namespace string
	// Name identifies the element within its namespace. Names need not be
	// unique.
	Name string
	// MIME is the element's media type; "" means application/octet-stream.
	MIME string
	// Data is the element's content.
	Data []byte
	// Signature optionally carries a signature element for this one, as
	// JXSE's MessageElement.getSignature does. Most elements have none.
	Signature *Element
}

// Text returns a text/plain;charset=UTF-8 element holding s.
func Text(namespace, name, s string) Element {
	return Element{Namespace: namespace, Name: name, MIME: TextUTF8, Data: []byte(s)}
}

// Bytes returns an application/octet-stream element holding b.
func Bytes(namespace, name string, b []byte) Element {
	return Element{Namespace: namespace, Name: name, Data: b}
}

// Type returns the element's media type, application/octet-stream when MIME
// is empty.
func (e Element) Type() string {
	if e.MIME == "" {
		return OctetStream
	}
	return e.MIME
}

// Equal reports whether two elements have the same namespace, name, media
// type (compared in canonical form), data and signature.
func (e Element) Equal(o Element) bool {
	if e.Namespace != o.Namespace || e.Name != o.Name || !bytes.Equal(e.Data, o.Data) {
		return false
	}
	if e.MIME != o.MIME && !SameMIME(e.Type(), o.Type()) {
		return false
	}
	if (e.Signature == nil) != (o.Signature == nil) {
		return false
	}
	return e.Signature == nil || e.Signature.Equal(*o.Signature)
}

// SameMIME reports whether a and b denote the same media type once both are
// put in canonical form. Invalid types are compared as strings.
func SameMIME(a, b string) bool {
	ca, errA := CanonicalMIME(a)
	cb, errB := CanonicalMIME(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return ca == cb
}
