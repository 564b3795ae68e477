package xmlc

import (
	"slices"
	"strings"
)

// The structure stream is a sequence of runs: the ops between one value
// and the next. A run is referred to by a uvarint r: 0 introduces a
// one-off run (uvarint length, ops) that defines something new (a child, an
// attribute, a name, a whitespace string or a misc item) and is not kept;
// r-1 equal to the number of runs kept so far introduces a run to keep
// (uvarint length, ops); any smaller r-1 replays kept run r-1. A run's ops
// are interpreted from the state the previous run ended in; the last op of
// a run may be a value op, whose value is the run's hole.
//
// Ops: a start tag of a node's k-th child (in order of first appearance)
// is the single byte opStart0+k for k < maxInlineChild, else opStartX and
// uvarint k; a child or attribute seen for the first time (k equal to the
// count so far) is followed by its name's index, a name, whitespace string
// or misc item seen for the first time (index equal to the count so far)
// is read from its section.
const (
	opEnd          = 0x00 // </name>
	opEndWS        = 0x01 // </name ws>: uvarint ws
	opClose        = 0x02 // >
	opCloseEmpty   = 0x03 // />
	opCloseWS      = 0x04 // ws>: uvarint ws
	opCloseEmptyWS = 0x05 // ws/>: uvarint ws
	opText         = 0x06 // the node's next text value
	opCDATA        = 0x07 // <![CDATA[ next text value ]]>
	opWS           = 0x08 // whitespace-only text: uvarint ws
	opMisc         = 0x09 // comment, PI, DOCTYPE, verbatim: uvarint misc
	opAttr         = 0x0A // ` name="value"`: uvarint k
	opAttrX        = 0x0B // other layouts: uvarint k, uvarint ws+1 ×3 (0: none), quote
	opStartX       = 0x0C // uvarint k
	opStart0       = 0x10

	maxInlineChild = 0x100 - opStart0
	// maxRun is the length of ops after which a run ends even without a
	// value, which bounds run keys and definitions.
	maxRun = 1 << 10
)

// Payload modes (first byte). modeModel is or-ed in when the XML model
// was primed with a shared model.
const (
	modeStored  = 0 // the input, verbatim
	modeGeneric = 1 // zstd frame without its magic number
	modeXMLZ    = 2 // uvarint size, CRC-32C, uvarint len, main (zstd, no magic), packed
	modeXMLRaw  = 3 // uvarint size, CRC-32C, uvarint len, main, packed
	modeModel   = 0x80
)

// Container methods.
const (
	methodRaw    = 0 // values, each NUL-terminated
	methodShapes = 1 // shapes (separators around digit groups) + columns
)

// Column modes (high three bits of a column's descriptor byte; the low
// five are the width mode: 0 minimal digits, 1..18 that many digits,
// widthStream one width byte per value).
const (
	colFOR        = 0 // uvarint min, bits; values-min packed
	colDeltaFOR   = 1 // uvarint first, varint min delta, bits; deltas-min packed
	colBytes      = 2 // uvarint min; one byte value-min per value, inline
	colVarint     = 3 // uvarints inline
	colDict       = 4 // uvarint k, k uvarints (delta-coded, ascending), index bytes inline
	colDeltaBytes = 5 // uvarint first, varint min delta; one byte delta-min per value
	widthStream   = 31
)

// node is an element path: the document (node 0) or a child name under a
// parent path. Containers hold the text and attribute values at a path.
type node struct {
	name     int32 // index in names; -1 for the document
	parent   int32
	children []int32
	attrs    []attr
	text     int32 // container of the node's text, -1 until it has one
}

type attr struct{ name, cont int32 }

// shape is a value with its digit groups taken out: the separators
// around them, joined by NUL in key.
type shape struct {
	key  string
	seps []string // nil when there are no digit groups (the value is key)
}

func newShape(key string) shape {
	if !strings.Contains(key, "\x00") {
		return shape{key: key}
	}
	return shape{key: key, seps: strings.Split(key, "\x00")}
}

// groups is the number of digit groups.
func (s *shape) groups() int { return max(len(s.seps)-1, 0) }

// cont is what a container remembers across documents: the shapes seen.
type cont struct {
	shapes []shape
	index  map[string]int32
}

// state is the dictionary both sides build as they go, and what a model
// primes them with: names, paths, whitespace strings, shapes.
type state struct {
	names   []string
	nameIdx map[string]int32
	ws      []string
	wsIdx   map[string]int32
	misc    []string
	miscIdx map[string]int32
	nodes   []node
	conts   []cont
}

func newState() *state {
	return &state{
		nameIdx: map[string]int32{},
		wsIdx:   map[string]int32{},
		miscIdx: map[string]int32{},
		nodes:   []node{{name: -1, parent: -1, text: -1}},
	}
}

// frozen returns a copy whose slices are clipped, so that appending to the
// copy's slices (or to those of a clone) never writes into shared arrays.
func (s *state) frozen() *state {
	f := &state{
		names:   slices.Clip(s.names),
		nameIdx: s.nameIdx,
		ws:      slices.Clip(s.ws),
		wsIdx:   s.wsIdx,
		misc:    slices.Clip(s.misc),
		miscIdx: s.miscIdx,
		nodes:   make([]node, len(s.nodes)),
		conts:   make([]cont, len(s.conts)),
	}
	for i, n := range s.nodes {
		n.children = slices.Clip(n.children)
		n.attrs = slices.Clip(n.attrs)
		f.nodes[i] = n
	}
	for i, c := range s.conts {
		f.conts[i] = cont{shapes: slices.Clip(c.shapes), index: c.index}
	}
	return f
}
