package id

import (
	"crypto/rand"
	"crypto/sha1"
	"fmt"
)

// Making IDs. Each constructor makes what JXSE 2.7's IDFactory makes for the
// same call, in the format of the group or module class it is given (the
// cbid format for the well-known groups and for IDs made from nothing).
// Random UUIDs come from crypto/rand; seeded IDs are deterministic and equal
// to JXSE's for the same seed.

// NewPeerGroupID returns a new random top-level peer group ID in the cbid
// format, as IDFactory.newPeerGroupID() does.
func NewPeerGroupID() ID {
	return compose(FormatCBID, KindPeerGroup, randomUUID(), [uuidLen]byte{})
}

// NewSubgroupID returns a new random peer group ID whose parent is parent,
// as IDFactory.newPeerGroupID(parent) does.
func NewSubgroupID(parent ID) (ID, error) {
	f, u, err := groupParts(parent, "parent")
	if err != nil {
		return ID{}, err
	}
	return compose(f, KindPeerGroup, randomUUID(), u), nil
}

// PeerGroupIDFromSeed returns the peer group ID that
// IDFactory.newPeerGroupID(parent, seed) gives, or
// IDFactory.newPeerGroupID(seed) when parent is the zero ID. The same seed
// always gives the same ID. In the cbid format the group's UUID is made
// from SHA-1(seed); in the uuid format (a uuid parent), from the first 16
// bytes of the seed.
func PeerGroupIDFromSeed(parent ID, seed []byte) (ID, error) {
	if parent.IsZero() {
		return compose(FormatCBID, KindPeerGroup, hashedUUID(seed), [uuidLen]byte{}), nil
	}
	f, u, err := groupParts(parent, "parent")
	if err != nil {
		return ID{}, err
	}
	return compose(f, KindPeerGroup, seededUUID(f, seed), u), nil
}

// NewPeerID returns a new random peer ID in group.
//
// JXSE 2.7's cbid factory hashes 4 random bytes, so its random peer IDs
// carry 32 bits of randomness; NewPeerID uses 128 random bits instead, in
// the same layout. Nodes should rather use PeerIDFromPublicKey.
func NewPeerID(group ID) (ID, error) {
	f, g, err := groupParts(group, "group")
	if err != nil {
		return ID{}, err
	}
	var u [uuidLen]byte
	if f == FormatCBID {
		rand.Read(u[:]) // a SHA-1 output in JXSE: no UUID version bits
	} else {
		u = randomUUID()
	}
	return compose(f, KindPeer, g, u), nil
}

// PeerIDFromSeed returns the peer ID that IDFactory.newPeerID(group, seed)
// gives. In the cbid format the peer's UUID is the first 16 bytes of
// SHA-1(seed), unchanged; in the uuid format it is the first 16 bytes of
// the seed, marked as a version 4 UUID.
func PeerIDFromSeed(group ID, seed []byte) (ID, error) {
	f, g, err := groupParts(group, "group")
	if err != nil {
		return ID{}, err
	}
	var u [uuidLen]byte
	if f == FormatCBID {
		u = sha1Prefix(seed)
	} else {
		copy(u[:], seed)
		u = asRandomUUID(u)
	}
	return compose(f, KindPeer, g, u), nil
}

// NewPipeID returns a new random pipe ID in group, as
// IDFactory.newPipeID(group) does.
func NewPipeID(group ID) (ID, error) {
	f, g, err := groupParts(group, "group")
	if err != nil {
		return ID{}, err
	}
	return compose(f, KindPipe, g, randomUUID()), nil
}

// PipeIDFromSeed returns the pipe ID that IDFactory.newPipeID(group, seed)
// gives: the same seed always names the same pipe. In the cbid format the
// pipe's UUID is made from SHA-1(seed), in the uuid format from the first
// 16 bytes of the seed.
func PipeIDFromSeed(group ID, seed []byte) (ID, error) {
	f, g, err := groupParts(group, "group")
	if err != nil {
		return ID{}, err
	}
	return compose(f, KindPipe, g, seededUUID(f, seed)), nil
}

// NewCodatID returns a new random codat ID in group, without a content
// hash, as IDFactory.newCodatID(group) does.
func NewCodatID(group ID) (ID, error) {
	f, g, err := groupParts(group, "group")
	if err != nil {
		return ID{}, err
	}
	return compose(f, KindCodat, g, randomUUID()), nil
}

// CodatIDFromSeed returns the codat ID that IDFactory.newCodatID(group,
// seed) gives, made like a seeded pipe ID.
func CodatIDFromSeed(group ID, seed []byte) (ID, error) {
	f, g, err := groupParts(group, "group")
	if err != nil {
		return ID{}, err
	}
	return compose(f, KindCodat, g, seededUUID(f, seed)), nil
}

// NewModuleClassID returns a new random module class ID (a base class, with
// no role) in the cbid format, as IDFactory.newModuleClassID() does.
func NewModuleClassID() ID {
	return compose(FormatCBID, KindModuleClass, randomUUID(), [uuidLen]byte{})
}

// NewModuleRoleID returns a new random role of the base class of class, in
// the format of class, as IDFactory.newModuleClassID(class) does.
func NewModuleRoleID(class ID) (ID, error) {
	if class.kind != KindModuleClass {
		return ID{}, fmt.Errorf("%w: %s is not a module class ID", ErrKind, describe(class))
	}
	return compose(class.format, KindModuleClass, [uuidLen]byte(class.value[:uuidLen]), randomUUID()), nil
}

// NewModuleSpecID returns a new random module spec ID of the module class
// class (a base class or a role), in the format of class.
//
// JXSE 2.7's IDFactory.newModuleSpecID(class) has a bug in the cbid format:
// it writes the class UUID where the spec UUID belongs, so that all the
// specs it makes for one class are the same ID. NewModuleSpecID makes a
// random spec UUID in both formats, as JXSE does in the uuid format.
func NewModuleSpecID(class ID) (ID, error) {
	if class.kind != KindModuleClass {
		return ID{}, fmt.Errorf("%w: %s is not a module class ID", ErrKind, describe(class))
	}
	return compose(class.format, KindModuleSpec, [uuidLen]byte(class.value[:uuidLen]), randomUUID()), nil
}

// groupParts returns the format that IDs made in group have and the UUID
// they embed.
func groupParts(group ID, what string) (Format, [uuidLen]byte, error) {
	if group.kind != KindPeerGroup {
		return 0, [uuidLen]byte{}, fmt.Errorf("%w: %s %s is not a peer group ID", ErrKind, what, describe(group))
	}
	f := group.format
	if f == FormatJXTA {
		f = FormatCBID // JXSE's IDNewInstances default
	}
	return f, [uuidLen]byte(group.value[:uuidLen]), nil
}

func compose(f Format, k Kind, first, second [uuidLen]byte) ID {
	id := ID{format: f, kind: k}
	copy(id.value[:uuidLen], first[:])
	copy(id.value[uuidLen:], second[:])
	return id
}

// randomUUID is JXSE's UUIDFactory.newUUID(): random bits marked as a
// version 4 UUID.
func randomUUID() [uuidLen]byte {
	var u [uuidLen]byte
	rand.Read(u[:])
	return asRandomUUID(u)
}

// asRandomUUID is JXSE's UUIDFactory.newUUID(long, long): it sets the
// version to 4, the variant to RFC 4122's, and the top bit of byte 10 (the
// multicast bit of the node field, marking a node ID that is no MAC
// address).
func asRandomUUID(u [uuidLen]byte) [uuidLen]byte {
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	u[10] |= 0x80
	return u
}

// seededUUID is the UUID of a seeded group, pipe or codat: in the cbid
// format SHA-1(seed) through UUIDFactory.newUUID(byte[]); in the uuid
// format the first 16 bytes of the seed (zero-padded) with the version and
// variant set by hand, which also clears bit 6 of byte 10.
func seededUUID(f Format, seed []byte) [uuidLen]byte {
	if f == FormatCBID {
		return hashedUUID(seed)
	}
	var u [uuidLen]byte
	copy(u[:], seed)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	u[10] = u[10]&0x3f | 0x80
	return u
}

func hashedUUID(seed []byte) [uuidLen]byte { return asRandomUUID(sha1Prefix(seed)) }

func sha1Prefix(seed []byte) [uuidLen]byte {
	sum := sha1.Sum(seed)
	return [uuidLen]byte(sum[:uuidLen])
}

// describe names an ID in error messages.
func describe(id ID) string {
	if id.IsZero() {
		return "(the zero ID)"
	}
	return id.String() + " (" + id.kind.String() + ")"
}
