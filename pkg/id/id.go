// Package id parses, formats and creates JXTA IDs (urn:jxta:…), as JXSE 2.7
// does, and derives a peer's JXTA ID from its libp2p identity.
//
// It is a foundation package: the endpoint, pipes and advertisements name
// peers, groups and pipes with these IDs; it does no I/O.
//
// # Formats
//
// Three ID formats exist: the "jxta" format for the well-known IDs
// (urn:jxta:jxta-NetGroup, urn:jxta:jxta-WorldGroup, urn:jxta:jxta-Null), and
// the "uuid" and "cbid" formats, which share one binary layout: up to 63
// bytes of identifying value followed by a type byte (01 codat, 02 peer
// group, 03 peer, 04 pipe, 05 module class, 06 module spec). The text form
// is the value's bytes in upper-case hex without its trailing zero bytes,
// then the type byte. A peer, pipe or codat ID starts with the 16-byte UUID
// of its peer group; a module spec ID starts with its module class's UUID.
// The well-known groups have fixed UUIDs inside other IDs ("YabadabaNPG P2P3"
// for the Net group, "YabadabaJxtaP2P3" for the World group, in ASCII).
//
// # Peer IDs from libp2p keys
//
// A node's JXTA peer ID is not chosen, it is computed:
//
//	urn:jxta:cbid-<group UUID><first 16 bytes of SHA-1(libp2p public key)>03
//
// where the key is libp2p's protobuf encoding (crypto.MarshalPublicKey).
// This is JXSE's own CBID construction (IDFactory.newPeerID(group, seed)
// hashes the seed with SHA-1), fed with the libp2p key instead of an X.509
// key, so JXSE computes the same ID from the same bytes. Because libp2p
// authenticates the key on every connection, a receiver can recompute the
// sender's JXTA ID (VerifyPeerID) and a peer cannot claim another's: doing
// so needs a SHA-1 second preimage on 128 bits.
package id

import (
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// Format is the ID format, the part after "urn:jxta:".
type Format uint8

// Formats.
const (
	FormatJXTA Format = iota + 1
	FormatUUID
	FormatCBID
)

func (f Format) String() string {
	switch f {
	case FormatJXTA:
		return "jxta"
	case FormatUUID:
		return "uuid"
	case FormatCBID:
		return "cbid"
	}
	return "invalid"
}

// Kind is what an ID names; its value is the type byte of the binary
// layout.
type Kind uint8

// Kinds.
const (
	KindNull        Kind = 0
	KindCodat       Kind = 1
	KindPeerGroup   Kind = 2
	KindPeer        Kind = 3
	KindPipe        Kind = 4
	KindModuleClass Kind = 5
	KindModuleSpec  Kind = 6
)

func (k Kind) String() string {
	switch k {
	case KindNull:
		return "null"
	case KindCodat:
		return "codat"
	case KindPeerGroup:
		return "peer group"
	case KindPeer:
		return "peer"
	case KindPipe:
		return "pipe"
	case KindModuleClass:
		return "module class"
	case KindModuleSpec:
		return "module spec"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Sentinel errors.
var (
	// ErrSyntax: not a urn:jxta: ID at all, or bad hex.
	ErrSyntax = errors.New("id: invalid JXTA ID")
	// ErrFormat: an ID format other than jxta, uuid and cbid.
	ErrFormat = errors.New("id: unknown JXTA ID format")
	// ErrKind: the ID is of another kind than required.
	ErrKind = errors.New("id: wrong kind of JXTA ID")
	// ErrMismatch: a peer ID that does not belong to the key it is
	// checked against.
	ErrMismatch = errors.New("id: peer ID does not match the public key")
)

// ParseError says what is wrong with an ID string and where. It unwraps to
// ErrSyntax or ErrFormat.
type ParseError struct {
	Input  string
	Offset int
	Reason string
	Err    error
}

func (e *ParseError) Error() string {
	in := e.Input
	if len(in) > 80 {
		in = in[:80] + "…"
	}
	return fmt.Sprintf("%v %q at byte %d: %s", e.Err, in, e.Offset, e.Reason)
}

func (e *ParseError) Unwrap() error { return e.Err }

const (
	valueLen = 63 // identifying bytes before the type byte
	uuidLen  = 16
	prefix   = "urn:jxta:"
)

// ID is a JXTA ID. It is a comparable value: use == and map keys. The zero
// ID is not valid (IsZero).
type ID struct {
	format Format
	kind   Kind
	// name is the jxta format's name ("NetGroup", "WorldGroup", "Null").
	name string
	// value holds the identifying bytes for uuid and cbid IDs.
	value [valueLen]byte
}

// Well-known IDs.
var (
	NullID           = ID{format: FormatJXTA, kind: KindNull, name: "Null"}
	NetPeerGroupID   = ID{format: FormatJXTA, kind: KindPeerGroup, name: "NetGroup"}
	WorldPeerGroupID = ID{format: FormatJXTA, kind: KindPeerGroup, name: "WorldGroup"}
)

// The UUIDs the well-known groups have inside other IDs.
var (
	netGroupUUID   = [uuidLen]byte{'Y', 'a', 'b', 'a', 'd', 'a', 'b', 'a', 'N', 'P', 'G', ' ', 'P', '2', 'P', '3'}
	worldGroupUUID = [uuidLen]byte{'Y', 'a', 'b', 'a', 'd', 'a', 'b', 'a', 'J', 'x', 't', 'a', 'P', '2', 'P', '3'}
)

// IsZero reports whether id is the zero value (no ID).
func (id ID) IsZero() bool { return id.format == 0 }

// Format returns the ID's format.
func (id ID) Format() Format { return id.format }

// Kind returns what the ID names.
func (id ID) Kind() Kind { return id.kind }

// String returns the ID as JXSE prints it: urn:jxta:… with upper-case hex.
func (id ID) String() string {
	switch id.format {
	case FormatJXTA:
		return prefix + "jxta-" + id.name
	case FormatUUID, FormatCBID:
		n := valueLen
		for n > 1 && id.value[n-1] == 0 {
			n--
		}
		b := make([]byte, 0, len(prefix)+5+2*(n+1))
		b = append(b, prefix...)
		b = append(b, id.format.String()...)
		b = append(b, '-')
		b = hexUpper(b, id.value[:n])
		b = hexUpper(b, []byte{byte(id.kind)})
		return string(b)
	}
	return ""
}

func hexUpper(dst, src []byte) []byte {
	const digits = "0123456789ABCDEF"
	for _, c := range src {
		dst = append(dst, digits[c>>4], digits[c&15])
	}
	return dst
}

// MarshalText implements encoding.TextMarshaler.
func (id ID) MarshalText() ([]byte, error) {
	if id.IsZero() {
		return nil, fmt.Errorf("%w: zero ID", ErrSyntax)
	}
	return []byte(id.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (id *ID) UnmarshalText(b []byte) error {
	p, err := Parse(string(b))
	if err != nil {
		return err
	}
	*id = p
	return nil
}

// Parse reads an ID. Like JXSE, it accepts the "urn:jxta:" prefix and hex
// digits in any case.
func Parse(s string) (ID, error) {
	bad := func(off int, err error, reason string) (ID, error) {
		return ID{}, &ParseError{Input: s, Offset: off, Reason: reason, Err: err}
	}
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return bad(0, ErrSyntax, `missing "urn:jxta:" prefix`)
	}
	rest := s[len(prefix):]
	dash := strings.IndexByte(rest, '-')
	if dash < 0 {
		return bad(len(prefix), ErrSyntax, "missing '-' after the format")
	}
	format, value := rest[:dash], rest[dash+1:]
	off := len(prefix) + dash + 1
	switch format {
	case "jxta":
		for _, w := range []ID{NullID, NetPeerGroupID, WorldPeerGroupID} {
			if strings.EqualFold(value, w.name) { // JXSE ignores case here
				return w, nil
			}
		}
		return bad(off, ErrSyntax, "unknown jxta-format ID "+fmt.Sprintf("%q", value))
	case "uuid", "cbid":
	default:
		return bad(len(prefix), ErrFormat, fmt.Sprintf("format %q (want jxta, uuid or cbid)", format))
	}
	if len(value)%2 != 0 || len(value) < 2 {
		return bad(off, ErrSyntax, "hex value must have an even, non-zero number of digits")
	}
	if len(value) > 2*(valueLen+1) {
		return bad(off, ErrSyntax, "longer than 64 bytes")
	}
	var raw [valueLen + 1]byte
	n, err := hex.Decode(raw[:], []byte(value))
	if err != nil {
		var ie hex.InvalidByteError
		pos := off
		if errors.As(err, &ie) {
			pos += strings.IndexByte(value, byte(ie))
		}
		return bad(pos, ErrSyntax, "not hex")
	}
	kind := Kind(raw[n-1])
	if kind < KindCodat || kind > KindModuleSpec {
		return bad(off+2*(n-1), ErrSyntax, fmt.Sprintf("unknown ID type %#02x", byte(kind)))
	}
	id := ID{format: FormatUUID, kind: kind}
	if format == "cbid" {
		id.format = FormatCBID
	}
	copy(id.value[:], raw[:n-1])
	return id, nil
}

// MustParse is Parse for constants; it panics on error.
func MustParse(s string) ID {
	id, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return id
}

// Group returns the peer group an ID belongs to, as JXSE reports it: the
// group a peer, pipe or codat ID names, a group's parent group, and NullID
// where there is none (a top-level group, module IDs, jxta-Null).
func (id ID) Group() ID {
	if id.format == FormatJXTA {
		if id == NetPeerGroupID {
			return WorldPeerGroupID
		}
		return NullID
	}
	var u [uuidLen]byte
	switch id.kind {
	case KindPeer, KindPipe, KindCodat:
		copy(u[:], id.value[:uuidLen])
	case KindPeerGroup:
		copy(u[:], id.value[uuidLen:2*uuidLen])
		if u == ([uuidLen]byte{}) {
			return NullID
		}
	default:
		return NullID
	}
	return groupFromUUID(id.format, u)
}

func groupFromUUID(f Format, u [uuidLen]byte) ID {
	switch u {
	case netGroupUUID:
		return NetPeerGroupID
	case worldGroupUUID:
		return WorldPeerGroupID
	}
	g := ID{format: f, kind: KindPeerGroup}
	copy(g.value[:], u[:])
	return g
}

// groupUUID is the UUID a group contributes to the IDs inside it.
func groupUUID(group ID) ([uuidLen]byte, error) {
	var u [uuidLen]byte
	switch {
	case group == NetPeerGroupID:
		return netGroupUUID, nil
	case group == WorldPeerGroupID:
		return worldGroupUUID, nil
	case group.kind != KindPeerGroup || group.format == FormatJXTA:
		return u, fmt.Errorf("%w: %v is a %v ID, not a peer group", ErrKind, group, group.kind)
	}
	copy(u[:], group.value[:uuidLen])
	return u, nil
}

func randomUUID() [uuidLen]byte {
	var u [uuidLen]byte
	rand.Read(u[:])
	return asUUIDv4(u)
}

// asUUIDv4 sets the bits JXSE's UUID factory sets on the random and
// hashed UUIDs it makes: version 4, the RFC 4122 variant, and the top bit of
// the node field (byte 10), which marks a node ID that is not a MAC address.
func asUUIDv4(u [uuidLen]byte) [uuidLen]byte {
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	u[10] |= 0x80
	return u
}

func hashSeed(seed []byte) [uuidLen]byte {
	sum := sha1.Sum(seed)
	return [uuidLen]byte(sum[:uuidLen])
}

func compose(kind Kind, group [uuidLen]byte, own [uuidLen]byte) ID {
	id := ID{format: FormatCBID, kind: kind}
	copy(id.value[:], group[:])
	copy(id.value[uuidLen:], own[:])
	return id
}

// NewPipeID returns a new random cbid pipe ID in group, as JXSE 2.7's
// IDFactory.newPipeID(group) does.
func NewPipeID(group ID) (ID, error) {
	g, err := groupUUID(group)
	if err != nil {
		return ID{}, err
	}
	return compose(KindPipe, g, randomUUID()), nil
}

// PipeIDFromSeed returns the cbid pipe ID JXSE's newPipeID(group, seed)
// gives: the same seed always names the same pipe.
func PipeIDFromSeed(group ID, seed []byte) (ID, error) {
	g, err := groupUUID(group)
	if err != nil {
		return ID{}, err
	}
	return compose(KindPipe, g, asUUIDv4(hashSeed(seed))), nil
}

// PeerIDFromSeed returns the cbid peer ID JXSE's newPeerID(group, seed)
// gives.
func PeerIDFromSeed(group ID, seed []byte) (ID, error) {
	g, err := groupUUID(group)
	if err != nil {
		return ID{}, err
	}
	return compose(KindPeer, g, hashSeed(seed)), nil
}

// NewPeerGroupID returns a new random cbid peer group ID.
func NewPeerGroupID() ID {
	u := randomUUID()
	id := ID{format: FormatCBID, kind: KindPeerGroup}
	copy(id.value[:], u[:])
	return id
}

// PeerIDFromPublicKey derives the JXTA peer ID of a libp2p identity in
// group (see the package documentation).
func PeerIDFromPublicKey(group ID, pub crypto.PubKey) (ID, error) {
	if pub == nil {
		return ID{}, fmt.Errorf("%w: no public key", ErrSyntax)
	}
	b, err := crypto.MarshalPublicKey(pub)
	if err != nil {
		return ID{}, fmt.Errorf("id: marshalling public key: %w", err)
	}
	return PeerIDFromSeed(group, b)
}

// VerifyPeerID checks that id is the JXTA peer ID of pub in id's group.
func VerifyPeerID(id ID, pub crypto.PubKey) error {
	if id.kind != KindPeer || id.format != FormatCBID {
		return fmt.Errorf("%w: %v is not a cbid peer ID", ErrKind, id)
	}
	want, err := PeerIDFromPublicKey(id.Group(), pub)
	if err != nil {
		return err
	}
	if want != id {
		return fmt.Errorf("%w: %v (the key's ID is %v)", ErrMismatch, id, want)
	}
	return nil
}
