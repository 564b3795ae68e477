package id

import (
	"fmt"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// PeerIDFromPublicKey returns the JXTA peer ID of the libp2p identity pub
// in group: the cbid peer ID whose UUID is the first 16 bytes of the SHA-1
// hash of crypto.MarshalPublicKey(pub). It equals JXSE's
// IDFactory.newPeerID(group, seed) with the marshalled key as the seed (for
// a group in the uuid format, JXSE's IDFactory.newPeerID on the cbid group
// with the same UUID). See the package documentation.
func PeerIDFromPublicKey(group ID, pub crypto.PubKey) (ID, error) {
	_, g, err := groupParts(group, "group")
	if err != nil {
		return ID{}, err
	}
	u, err := keyUUID(pub)
	if err != nil {
		return ID{}, err
	}
	return compose(FormatCBID, KindPeer, g, u), nil
}

// VerifyPeerID checks that id is the JXTA peer ID of the libp2p identity
// pub, in whatever group id names (compare id.Group() to check the group).
// It returns an error wrapping ErrKind if id is not a cbid peer ID,
// ErrMismatch if it belongs to another key, ErrKey if pub is unusable.
func VerifyPeerID(id ID, pub crypto.PubKey) error {
	if id.kind != KindPeer || id.format != FormatCBID {
		return fmt.Errorf("%w: %s is not a cbid peer ID", ErrKind, describe(id))
	}
	u, err := keyUUID(pub)
	if err != nil {
		return err
	}
	if want := compose(FormatCBID, KindPeer, [uuidLen]byte(id.value[:uuidLen]), u); want != id {
		return fmt.Errorf("%w: %v, the key's is %v", ErrMismatch, id, want)
	}
	return nil
}

func keyUUID(pub crypto.PubKey) ([uuidLen]byte, error) {
	if pub == nil {
		return [uuidLen]byte{}, fmt.Errorf("%w: nil", ErrKey)
	}
	b, err := crypto.MarshalPublicKey(pub)
	if err != nil {
		return [uuidLen]byte{}, fmt.Errorf("%w: %w", ErrKey, err)
	}
	return sha1Prefix(b), nil
}

// PeerIDFromSPKI returns the cbid peer ID JXSE 2.7 gives the holder of a
// key: in the world peer group, with the first 16 bytes of the SHA-1 hash
// of the key's DER SubjectPublicKeyInfo as its unique part, no bits
// altered. A JXSE peer checks a CBJX-signed router message's source
// against the ID so derived from the signer's certificate.
func PeerIDFromSPKI(spki []byte) ID {
	return compose(FormatCBID, KindPeer, worldUUID, sha1Prefix(spki))
}
