package id_test

import (
	"bytes"
	"fmt"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/p2pmsg/p2pmsg/pkg/id"
)

func Example() {
	// JXSE accepts lower-case hex and prints upper-case.
	pipe, err := id.Parse("urn:jxta:cbid-59616261646162614e50472050325033eb4f5b5183454c03b3fbb0e378148f9d04")
	if err != nil {
		panic(err)
	}
	fmt.Println(pipe)
	fmt.Println(pipe.Format(), pipe.Kind(), "ID in", pipe.Group())
	fmt.Println(pipe.Group().Kind(), "ID in", pipe.Group().Group())

	_, err = id.Parse("urn:jxta:uuid-0G02")
	fmt.Println(err)
	// Output:
	// urn:jxta:cbid-59616261646162614E50472050325033EB4F5B5183454C03B3FBB0E378148F9D04
	// cbid pipe ID in urn:jxta:jxta-NetGroup
	// peer group ID in urn:jxta:jxta-WorldGroup
	// id: invalid JXTA ID syntax "urn:jxta:uuid-0G02" at byte 15: 'G' is not a hex digit
}

func ExamplePipeIDFromSeed() {
	// The same as JXSE's IDFactory.newPipeID(PeerGroupID.defaultNetPeerGroupID, "seed".getBytes()).
	pipe, err := id.PipeIDFromSeed(id.NetPeerGroupID, []byte("seed"))
	if err != nil {
		panic(err)
	}
	fmt.Println(pipe)
	// Output:
	// urn:jxta:cbid-59616261646162614E5047205032503392713D47093741118F31F2A71986C41104
}

func ExamplePeerIDFromPublicKey() {
	// A libp2p identity (made from a fixed seed to keep the output stable).
	priv, pub, err := crypto.GenerateEd25519Key(bytes.NewReader(make([]byte, 32)))
	if err != nil {
		panic(err)
	}
	peer, err := id.PeerIDFromPublicKey(id.NetPeerGroupID, pub)
	if err != nil {
		panic(err)
	}
	fmt.Println(peer)
	fmt.Println(id.VerifyPeerID(peer, priv.GetPublic()))

	_, other, _ := crypto.GenerateEd25519Key(bytes.NewReader(bytes.Repeat([]byte{1}, 32)))
	fmt.Println(id.VerifyPeerID(peer, other) != nil)
	// Output:
	// urn:jxta:cbid-59616261646162614E504720503250330AE65DD272BDCBC13D927455A871977903
	// <nil>
	// true
}
