// Package id parses, formats and creates JXTA IDs (urn:jxta:…) exactly as
// the JXSE 2.7 reference implementation does, and derives a peer's JXTA ID
// from its libp2p identity.
//
// It is a foundation package: advertisements, the endpoint and pipes name
// peers, groups and pipes with these IDs. It builds only on the standard
// library and libp2p's crypto package, and does no I/O.
//
// # Formats and layout
//
// Three ID formats exist:
//
//   - jxta: the well-known IDs urn:jxta:jxta-NetGroup (NetPeerGroupID),
//     urn:jxta:jxta-WorldGroup (WorldPeerGroupID) and urn:jxta:jxta-Null
//     (NullID);
//   - uuid and cbid: a 64-byte value whose last byte is the type (Kind: 01
//     codat, 02 peer group, 03 peer, 04 pipe, 05 module class, 06 module
//     spec, 07 content). The text form is the first 63 bytes in upper-case
//     hex without their trailing zero bytes (at least one byte is kept),
//     then the type byte: urn:jxta:cbid-<hex><type>.
//
// The 63 bytes are made of 16-byte UUIDs. A peer, pipe, codat or content ID
// starts with the UUID of its peer group, then its own UUID (a codat may
// add a 20-byte SHA-1 of its content). A peer group ID is its own UUID then
// its parent group's UUID (zero for none). A module class ID is the class
// UUID then a role UUID (zero for the base class); a module spec ID is the
// class UUID then the spec UUID. Inside other IDs the well-known groups
// appear as fixed UUIDs, "YabadabaNPG P2P3" (Net) and "YabadabaJxtaP2P3"
// (World) in ASCII, and a uuid or cbid group ID with exactly that value
// parses to the well-known ID, as in JXSE.
//
// The uuid and cbid formats share this layout; they differ in how new IDs
// are made: uuid IDs use the seed bytes directly, cbid ("code based") IDs
// hash them with SHA-1. JXSE 2.7 makes cbid IDs by default, and so does
// this package: a new ID takes the format of the group (or module class) it
// is made in, the cbid format for the well-known groups.
//
// # Parsing
//
// Parse accepts what JXSE's IDFactory.fromURI accepts for these formats:
// the "urn" and "jxta" parts of the prefix and the hex digits in any case,
// the well-known names in any case (urn:jxta:jxta-netgroup), hex values
// with leading zero bytes or extra trailing zero bytes. String prints what
// JXSE's toString prints, byte for byte. Parse is stricter than JXSE in a
// few corners, each rejected with an error (see ParseError):
//
//   - other formats ("urn:jxta:foo-…", "urn:jxta:CBID-…", JXSE's rarely
//     used "binaryid"): JXSE keeps them as opaque IDs, Parse returns
//     ErrFormat;
//   - URI syntax that java.net.URI resolves before JXSE sees the value:
//     percent escapes ("%30") and a fragment ("#…"), which Parse refuses as
//     ErrSyntax;
//   - what Java's Integer.parseInt tolerates inside a hex pair: a sign
//     ("+F", "-F") and non-ASCII Unicode digits; Parse wants ASCII hex.
//
// One ID JXSE cannot read is accepted: the cbid spelling of a well-known
// group (urn:jxta:cbid-59616261646162614E5047205032503302) makes JXSE 2.7
// throw a ClassCastException; Parse returns NetPeerGroupID, as JXSE does
// for the uuid spelling. And one JXSE oddity is reproduced: JXSE prints a
// cbid content ID (type 07) in the uuid format, so Parse gives it
// FormatUUID.
//
// IDs of the two formats are different values here, while JXSE's equals
// treats urn:jxta:uuid-X and urn:jxta:cbid-X as the same ID, and since
// fromURI interns IDs, JXSE may print a cbid ID it parsed in the uuid
// format if an equal uuid ID is alive in the JVM.
//
// # Peer IDs from libp2p keys
//
// A node's JXTA peer ID is not chosen, it is computed from the libp2p
// public key that the node's connections are authenticated with:
//
//	urn:jxta:cbid-<group UUID><first 16 bytes of SHA-1(key)>03
//
// where key is libp2p's protobuf encoding of the public key
// (crypto.MarshalPublicKey). This is JXSE's own cbid construction for a
// seeded peer ID, IDFactory.newPeerID(group, seed), with the key as the
// seed, so JXSE computes the same ID from the same bytes. A receiver that
// knows the libp2p key of the connection recomputes the sender's peer ID
// (VerifyPeerID); to claim another peer's ID, a node would need a key whose
// SHA-1 hash starts with the same 128 bits, a second preimage. (Making two
// keys of its own with one ID is far cheaper, about 2^64 work, but gains a
// node nothing.) The peer ID is in the cbid format even in a uuid group,
// since JXSE's uuid construction uses the seed unhashed.
package id

import (
	"bytes"
	"fmt"
)

// Format is an ID format, the part of an ID between "urn:jxta:" and "-".
// The zero Format belongs to the zero ID only.
type Format uint8

// ID formats.
const (
	FormatJXTA Format = iota + 1 // the well-known IDs
	FormatUUID                   // UUIDs, seeds used as they are
	FormatCBID                   // UUIDs, seeds hashed with SHA-1 (JXSE's default)
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
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// Kind is what an ID names. Its value is the type byte that ends uuid and
// cbid IDs.
type Kind uint8

// ID kinds.
const (
	KindNull        Kind = 0 // the Null ID (and the zero ID)
	KindCodat       Kind = 1
	KindPeerGroup   Kind = 2
	KindPeer        Kind = 3
	KindPipe        Kind = 4
	KindModuleClass Kind = 5
	KindModuleSpec  Kind = 6
	KindContent     Kind = 7 // JXSE 2.7's content IDs: parsed and printed only
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
	case KindContent:
		return "content"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

const (
	prefix   = "urn:jxta:"
	valueLen = 63 // bytes before the type byte
	uuidLen  = 16
	// maxText is the length of the longest ID text.
	maxText = len(prefix) + len("cbid-") + 2*(valueLen+1)
)

// ID is a JXTA ID: a small comparable value, usable with == and as a map
// key. Two IDs are equal when they print the same. The zero ID is no ID
// (IsZero); it prints as "".
type ID struct {
	format Format
	kind   Kind
	// value holds the 63 bytes before the type byte. The well-known groups
	// hold the UUID they have inside other IDs, so that every group's UUID
	// is value[:16].
	value [valueLen]byte
}

// The UUIDs the well-known groups have inside other IDs.
var (
	netUUID   = [uuidLen]byte([]byte("YabadabaNPG P2P3"))
	worldUUID = [uuidLen]byte([]byte("YabadabaJxtaP2P3"))
)

// The well-known IDs.
var (
	// NullID is urn:jxta:jxta-Null, JXSE's ID.nullID.
	NullID = ID{format: FormatJXTA, kind: KindNull}
	// NetPeerGroupID is urn:jxta:jxta-NetGroup, the default net peer group;
	// its parent is the World group.
	NetPeerGroupID = wellKnownGroup(netUUID)
	// WorldPeerGroupID is urn:jxta:jxta-WorldGroup, the root group.
	WorldPeerGroupID = wellKnownGroup(worldUUID)
)

func wellKnownGroup(u [uuidLen]byte) ID {
	id := ID{format: FormatJXTA, kind: KindPeerGroup}
	copy(id.value[:], u[:])
	return id
}

// IsZero reports whether id is the zero ID, which names nothing.
func (id ID) IsZero() bool { return id.format == 0 }

// Format returns the ID's format; 0 for the zero ID.
func (id ID) Format() Format { return id.format }

// Kind returns what the ID names; KindNull for NullID and the zero ID.
func (id ID) Kind() Kind { return id.kind }

// Group returns the peer group an ID belongs to, as JXSE's getPeerGroupID
// reports it for peer, pipe, codat and content IDs; for a peer group ID it
// is the parent group (getParentPeerGroupID): WorldPeerGroupID for the Net
// group, the group whose UUID is embedded for others. Group returns the
// zero ID where JXSE has none: for the World group, a group without
// parent, module IDs and NullID.
//
// The group has the format of the ID (the uuid format for content IDs, as
// in JXSE) and carries only the group's UUID: a group's grandparent is not
// recorded in IDs inside it.
func (id ID) Group() ID {
	switch id.format {
	case FormatJXTA:
		if id == NetPeerGroupID {
			return WorldPeerGroupID
		}
		return ID{}
	case FormatUUID, FormatCBID:
	default:
		return ID{}
	}
	var u [uuidLen]byte
	switch id.kind {
	case KindPeer, KindPipe, KindCodat, KindContent:
		u = [uuidLen]byte(id.value[:uuidLen])
	case KindPeerGroup:
		u = [uuidLen]byte(id.value[uuidLen : 2*uuidLen])
		if u == ([uuidLen]byte{}) {
			return ID{}
		}
	default:
		return ID{}
	}
	return groupOfUUID(id.format, u)
}

// groupOfUUID is the group ID with UUID u, well-known if u is one of theirs.
func groupOfUUID(f Format, u [uuidLen]byte) ID {
	switch u {
	case netUUID:
		return NetPeerGroupID
	case worldUUID:
		return WorldPeerGroupID
	}
	g := ID{format: f, kind: KindPeerGroup}
	copy(g.value[:], u[:])
	return g
}

// BaseClass returns the base module class of a module class or module spec
// ID, as JXSE's getBaseClass does: the class UUID without a role. It
// returns the zero ID for other kinds.
func (id ID) BaseClass() ID {
	if id.kind != KindModuleClass && id.kind != KindModuleSpec || id.format == FormatJXTA {
		return ID{}
	}
	b := ID{format: id.format, kind: KindModuleClass}
	copy(b.value[:uuidLen], id.value[:uuidLen])
	return b
}

// Compare orders IDs: by format, then by value, then by kind. It returns 0
// exactly when the IDs are equal. The order is stable across versions but
// is not the order of the ID strings.
func (id ID) Compare(other ID) int {
	if id.format != other.format {
		return cmp(int(id.format), int(other.format))
	}
	if c := bytes.Compare(id.value[:], other.value[:]); c != 0 {
		return c
	}
	return cmp(int(id.kind), int(other.kind))
}

func cmp(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// String returns the ID as JXSE's toString prints it, such as
// urn:jxta:cbid-59616261646162614E50472050325033EB4F5B5183454C03B3FBB0E378148F9D04,
// or "" for the zero ID.
func (id ID) String() string {
	var buf [maxText]byte
	return string(id.appendTo(buf[:0]))
}

// AppendText implements encoding.TextAppender: it appends String's text.
func (id ID) AppendText(b []byte) ([]byte, error) { return id.appendTo(b), nil }

// MarshalText implements encoding.TextMarshaler. The zero ID marshals to
// empty text.
func (id ID) MarshalText() ([]byte, error) { return id.appendTo(nil), nil }

// UnmarshalText implements encoding.TextUnmarshaler with Parse; empty text
// gives the zero ID.
func (id *ID) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*id = ID{}
		return nil
	}
	p, err := Parse(string(text))
	if err != nil {
		return err
	}
	*id = p
	return nil
}

func (id ID) appendTo(b []byte) []byte {
	switch id.format {
	case FormatJXTA:
		b = append(b, prefix+"jxta-"...)
		switch id {
		case NetPeerGroupID:
			return append(b, "NetGroup"...)
		case WorldPeerGroupID:
			return append(b, "WorldGroup"...)
		}
		return append(b, "Null"...)
	case FormatUUID:
		b = append(b, prefix+"uuid-"...)
	case FormatCBID:
		b = append(b, prefix+"cbid-"...)
	default:
		return b
	}
	n := valueLen
	for n > 1 && id.value[n-1] == 0 {
		n--
	}
	for _, c := range id.value[:n] {
		b = append(b, upperHex[c>>4], upperHex[c&15])
	}
	return append(b, upperHex[id.kind>>4], upperHex[id.kind&15])
}

const upperHex = "0123456789ABCDEF"
