package node_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	dhtpb "github.com/libp2p/go-libp2p-kad-dht/pb"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/multiformats/go-multihash"
	"google.golang.org/protobuf/proto"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// floodProviders writes n ADD_PROVIDER messages for random keys, naming
// from as the provider, on one DHT stream from from to to.
func floodProviders(t *testing.T, ctx context.Context, from, to *node.Node, n int) {
	t.Helper()
	st, err := from.Host().NewStream(ctx, to.ID(), node.DHTProtocolPrefix+"/kad/1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	self := dhtpb.RawPeerInfosToPBPeers([]peer.AddrInfo{from.AddrInfo()})
	var buf []byte
	for i := range n {
		key := make([]byte, 34)
		key[0], key[1] = 0x12, 0x20 // a sha2-256 multihash
		rand.Read(key[2:])
		m := dhtpb.NewMessage(dhtpb.Message_ADD_PROVIDER, key, 0)
		m.ProviderPeers = self
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		buf = append(binary.AppendUvarint(buf, uint64(len(b))), b...)
		if len(buf) > 64<<10 || i == n-1 {
			if _, err := st.Write(buf); err != nil {
				t.Fatal(err)
			}
			buf = buf[:0]
		}
	}
}

// TestDHTProviderFloodBounded: one peer announcing provider records for
// made-up keys to a DHT server gets 4,096 of them kept, the rest refused
// and counted, and another peer's announcement is still kept.
func TestDHTProviderFloodBounded(t *testing.T) {
	victim := testutil.NewNode(t, node.WithDHT(node.DHTServer))
	attacker := testutil.NewNode(t)
	honest := testutil.NewNode(t, node.WithDHT(node.DHTClient), node.WithBootstrapPeers(victim.AddrInfo()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := attacker.Connect(ctx, victim.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	// kad-dht writes records in batches of 256: a multiple of it is all
	// written when the last message is handled.
	const sent = 4096 + 4*256
	floodProviders(t, ctx, attacker, victim, sent)
	for victim.DHTStats().ProviderRecords+int(victim.DHTStats().ProvidersRefused) < sent && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	if st := victim.DHTStats(); st.ProviderRecords != 4096 || st.ProvidersRefused != sent-4096 {
		t.Fatalf("after %d records from one peer: %+v, want 4,096 kept and the rest refused", sent, st)
	}
	mh, err := multihash.Sum([]byte("an honest pipe"), multihash.SHA2_256, -1)
	if err != nil {
		t.Fatal(err)
	}
	c := cid.NewCidV1(cid.Raw, mh)
	if err := honest.Routing().Provide(ctx, c, true); err != nil {
		t.Fatal(err)
	}
	ps := victim.Routing().(*dht.IpfsDHT).ProviderStore()
	var provs []peer.AddrInfo
	for len(provs) == 0 && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond) // Provide returns once it has sent
		provs, err = ps.GetProviders(ctx, mh)
	}
	if err != nil || len(provs) != 1 || provs[0].ID != honest.ID() {
		t.Fatalf("the honest peer's record beside the flood: %v %v", provs, err)
	}
}
