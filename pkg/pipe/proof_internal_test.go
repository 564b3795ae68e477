package pipe

import (
	"crypto/rand"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/p2pmsg/p2pmsg/pkg/id"
)

// FuzzVerifyProof: whatever a peer sends as a binding proof, verifying
// it ends in a verdict, and only the true signature over the statement
// passes.
func FuzzVerifyProof(f *testing.F) {
	priv, pub, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	binder, _ := peer.IDFromPublicKey(pub)
	pipe, _ := id.NewPipeID(id.NetPeerGroupID)
	nonce := make([]byte, nonceSize)
	good, _ := priv.Sign(proofStatement(pipe, RoleInput, binder, nonce))
	f.Add(good, nonce, RoleInput)
	f.Add([]byte{}, nonce, RoleBidi)
	f.Add(make([]byte, 64), []byte{1}, "x")
	f.Fuzz(func(t *testing.T, proof, n []byte, role string) {
		err := verifyProof(pub, pipe, role, binder, n, proof)
		if err == nil && (string(proof) != string(good) || string(n) != string(nonce) || role != RoleInput) {
			t.Fatalf("forged proof accepted: %x", proof)
		}
	})
}
