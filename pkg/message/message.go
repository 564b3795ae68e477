// Package message is p2pmsg's model of a JXTA message: an ordered list of
// namespaced, MIME-typed elements.
//
// It is the value every layer carries (endpoint, pipe, socket, encoding) and
// it does no I/O: package wire turns it into bytes. The model follows JXSE's
// net.jxta.endpoint.Message: elements keep the order they were added in, the
// namespaces "" (the default) and "jxta" always exist implicitly, and several
// elements may share a namespace and name.
//
// # Sharing and copy-on-write
//
// A Message holds its elements by value and an element's Data by reference.
// Clone copies only the list of element headers, never the payload bytes, so
// a layer that needs to replace, add or remove one element (an encoder that
// compresses one element, say) clones the message and edits the clone; the
// other elements' bytes stay shared. For this to be safe, Data must be
// treated as immutable once it is in a message: never write into a slice you
// have added, or one you got from a message.
//
// A Message is not safe for concurrent mutation; concurrent reads are fine.
package message

import (
	"iter"
	"slices"
)

// Namespaces that exist in every message.
const (
	DefaultNamespace = ""
	JXTANamespace    = "jxta"
)

// Message is an ordered list of elements. The zero value is an empty message
// ready to use.
type Message struct {
	elems []Element
}

// New returns a message holding elems, in order. The slice is copied; the
// elements' data is not.
func New(elems ...Element) *Message {
	return &Message{elems: slices.Clone(elems)}
}

// FromElements returns a message that takes ownership of elems without
// copying the slice. It exists for decoders that build the slice themselves.
func FromElements(elems []Element) *Message {
	return &Message{elems: elems}
}

// Len returns the number of elements.
func (m *Message) Len() int { return len(m.elems) }

// At returns the i-th element in wire order. It panics if i is out of range,
// like a slice index.
func (m *Message) At(i int) Element { return m.elems[i] }

// Elements returns the elements in order. The returned slice is the
// message's own: read it, do not modify it (use Clone and the mutators).
func (m *Message) Elements() []Element { return m.elems }

// Add appends elements to the end of the message.
func (m *Message) Add(elems ...Element) { m.elems = append(m.elems, elems...) }

// AddBytes appends one element built from its parts.
func (m *Message) AddBytes(namespace, name, mime string, data []byte) {
	m.elems = append(m.elems, Element{Namespace: namespace, Name: name, MIME: mime, Data: data})
}

// Get returns the first element with the given namespace and name.
func (m *Message) Get(namespace, name string) (Element, bool) {
	if i := m.Index(namespace, name); i >= 0 {
		return m.elems[i], true
	}
	return Element{}, false
}

// Index returns the position of the first element with the given namespace
// and name, or -1.
func (m *Message) Index(namespace, name string) int {
	for i := range m.elems {
		if m.elems[i].Name == name && m.elems[i].Namespace == namespace {
			return i
		}
	}
	return -1
}

// Set replaces the element at position i. It panics if i is out of range.
func (m *Message) Set(i int, e Element) { m.elems[i] = e }

// Replace puts e in place of the first element with e's namespace and name
// and removes any further elements with that namespace and name, as JXSE's
// replaceMessageElement does. If there is none, e is appended. It returns the
// element that was replaced first, if any.
func (m *Message) Replace(e Element) (old Element, replaced bool) {
	i := m.Index(e.Namespace, e.Name)
	if i < 0 {
		m.elems = append(m.elems, e)
		return Element{}, false
	}
	old = m.elems[i]
	m.elems[i] = e
	j := i + 1
	for k := i + 1; k < len(m.elems); k++ {
		if m.elems[k].Name == e.Name && m.elems[k].Namespace == e.Namespace {
			continue
		}
		m.elems[j] = m.elems[k]
		j++
	}
	clear(m.elems[j:]) // drop references to removed data
	m.elems = m.elems[:j]
	return old, true
}

// Remove deletes every element with the given namespace and name and
// returns how many it removed.
func (m *Message) Remove(namespace, name string) int {
	n := len(m.elems)
	m.elems = slices.DeleteFunc(m.elems, func(e Element) bool {
		return e.Name == name && e.Namespace == namespace
	})
	return n - len(m.elems)
}

// RemoveAt deletes the element at position i.
func (m *Message) RemoveAt(i int) { m.elems = slices.Delete(m.elems, i, i+1) }

// All iterates over the elements in order, with their positions.
func (m *Message) All() iter.Seq2[int, Element] {
	return func(yield func(int, Element) bool) {
		for i, e := range m.elems {
			if !yield(i, e) {
				return
			}
		}
	}
}

// Namespace iterates, in order, over the elements of one namespace.
func (m *Message) Namespace(namespace string) iter.Seq[Element] {
	return func(yield func(Element) bool) {
		for _, e := range m.elems {
			if e.Namespace == namespace && !yield(e) {
				return
			}
		}
	}
}

// Namespaces returns the distinct namespaces of the elements, in the order
// they first appear.
func (m *Message) Namespaces() []string {
	var out []string
	for _, e := range m.elems {
		if !slices.Contains(out, e.Namespace) {
			out = append(out, e.Namespace)
		}
	}
	return out
}

// Clone returns a copy that shares the elements' data but not the list:
// adding, replacing or removing elements in either copy leaves the other
// untouched. Its cost is one allocation of len(elements) headers.
func (m *Message) Clone() *Message {
	if m == nil {
		return nil
	}
	return &Message{elems: slices.Clone(m.elems)}
}

// Equal reports whether two messages hold equal elements in the same order.
func (m *Message) Equal(o *Message) bool {
	if m.Len() != o.Len() {
		return false
	}
	for i := range m.elems {
		if !m.elems[i].Equal(o.elems[i]) {
			return false
		}
	}
	return true
}

// PayloadSize returns the sum of the elements' data lengths, signatures
// included.
func (m *Message) PayloadSize() int {
	n := 0
	for i := range m.elems {
		for e := &m.elems[i]; e != nil; e = e.Signature {
			n += len(e.Data)
		}
	}
	return n
}
