package seal_test

import (
	"crypto/rand"
	"fmt"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/seal"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/zstd"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// Compress, then seal to one recipient's libp2p identity.
func Example() {
	bobPriv, bobPub, _ := crypto.GenerateEd25519Key(rand.Reader)

	z, _ := zstd.New()
	toBob, _ := seal.New(seal.WithRecipient(bobPub))
	alice, _ := encoding.New([]encoding.Codec{z, toBob},
		encoding.WithSelector(encoding.ByName("salary")), encoding.WithPipeID("urn:jxta:pipe-1"))
	m, _ := alice.Encode(message.New(message.Text("", "salary", "42000"), message.Text("", "hello", "hi")))

	asBob, _ := seal.New(seal.WithIdentity(bobPriv))
	reg, _ := encoding.NewRegistry(z, asBob)
	bob, _ := encoding.NewDecoder(encoding.WithRegistry(reg), encoding.WithPipeID("urn:jxta:pipe-1"))
	got, err := bob.Decode(m)
	fmt.Println(string(got.At(0).Data), err)

	eve, _ := encoding.NewDecoder(encoding.WithPipeID("urn:jxta:pipe-1")) // default registry: no seal key
	_, err = eve.Decode(m)
	fmt.Println(err)
	// Output:
	// 42000 <nil>
	// element 0 "":"salary" (codec seal): encoding: unknown codec: "seal" (none set up here: build one with its options, as seal's keys, and register it)
}
