package pipe

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/id"
)

// Binding proofs.
//
// A peer that answers a binding query "found" for a pipe that needs proof
// (its advertisement names binders, or it is secure) signs, with its
// libp2p key, a statement binding the pipe ID, the role, its own peer ID
// and the querier's fresh nonce:
//
//	"p2pmsg-pipe-binding-v1" || lp(pipe ID) || lp(role) || lp(binder) || lp(nonce)
//
// The querier checks the signature with the key the binder's peer ID
// names, and that the binder is one the advertisement allows. The nonce
// makes an answer good for one query only. An answer that fails is
// ignored and counted (Stats.UnprovenAnswers), and resolution goes on
// with the other answers.

const (
	proofDomain = "p2pmsg-pipe-binding-v1"
	nonceSize   = 16
	// maxProofSize bounds a proof: an RSA-4096 signature is 512 bytes.
	maxProofSize = 1024
)

// ErrUnprovable is returned when resolving, by query or the DHT, a secure
// pipe whose advertisement names no binders: nothing could tell its true
// binder from any peer claiming to be it. Name the binders in the
// advertisement (adv.PipeAdvertisement.Binders) or the peer (ToPeers).
var ErrUnprovable = errors.New("pipe: secure pipe names no binders: resolution could not be trusted")

// needsProof reports whether answers for a must prove the binding.
func needsProof(a *adv.PipeAdvertisement) bool {
	return len(a.Binders) > 0 || a.Type == adv.UnicastSecure
}

// proofStatement is what a binder signs.
func proofStatement(pipe id.ID, role string, binder peer.ID, nonce []byte) []byte {
	b := []byte(proofDomain)
	for _, f := range [][]byte{[]byte(pipe.String()), []byte(role), []byte(binder), nonce} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

// newNonce returns a fresh query nonce.
func newNonce() []byte {
	n := make([]byte, nonceSize)
	rand.Read(n) // never fails (crypto/rand)
	return n
}

// signProof signs this peer's binding of pipe for a query's nonce.
func (s *Service) signProof(pipe id.ID, role string, nonce []byte) ([]byte, error) {
	key := s.host.Peerstore().PrivKey(s.self)
	if key == nil {
		return nil, errors.New("pipe: no private key to sign a binding proof")
	}
	return key.Sign(proofStatement(pipe, role, s.self, nonce))
}

// checkProof verifies that binder proved its binding of a's pipe in role
// for nonce, and that a allows it to bind the pipe.
func (s *Service) checkProof(a *adv.PipeAdvertisement, role string, binder peer.ID, nonce, proof []byte) error {
	if len(a.Binders) > 0 && !slices.Contains(a.Binders, binder.String()) {
		return fmt.Errorf("%s is not among the pipe's binders", binder)
	}
	if len(proof) == 0 || len(proof) > maxProofSize {
		return fmt.Errorf("no binding proof from %s", binder)
	}
	pub := s.host.Peerstore().PubKey(binder)
	if pub == nil {
		var err error
		if pub, err = binder.ExtractPublicKey(); err != nil {
			return fmt.Errorf("no key for %s: %w", binder, err)
		}
	}
	return verifyProof(pub, a.ID, role, binder, nonce, proof)
}

// verifyProof checks a proof's signature.
func verifyProof(pub crypto.PubKey, pipe id.ID, role string, binder peer.ID, nonce, proof []byte) error {
	if !binder.MatchesPublicKey(pub) {
		return fmt.Errorf("key does not match %s", binder)
	}
	ok, err := pub.Verify(proofStatement(pipe, role, binder, nonce), proof)
	if err != nil || !ok {
		return fmt.Errorf("bad binding proof from %s", binder)
	}
	return nil
}
