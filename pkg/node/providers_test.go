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

// TestProviderSybilsCannotFillTheStore: the store's total bound (256 Ki
// records) is 64 times the per-peer bound (4,096), and a libp2p peer ID
// costs one Ed25519 key: 64 identities announcing 4,096 made-up keys each
// fill it. An honest peer's announcement then takes the place of one of
// theirs (it was refused, for the 48 h the records live, and pipe
// resolution through this server found no honest provider).
func TestProviderSybilsCannotFillTheStore(t *testing.T) {
	victim := testutil.NewNode(t, node.WithDHT(node.DHTServer))
	honest := testutil.NewNode(t, node.WithDHT(node.DHTClient), node.WithBootstrapPeers(victim.AddrInfo()))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const sybils, each = 64, 4096
	for i := range sybils {
		a := testutil.NewNode(t)
		if err := a.Connect(ctx, victim.AddrInfo()); err != nil {
			t.Fatal(err)
		}
		floodProviders(t, ctx, a, victim, each)
		for victim.DHTStats().ProviderRecords+int(victim.DHTStats().ProvidersRefused) < (i+1)*each && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		if ctx.Err() != nil {
			t.Fatalf("sybil %d: %+v", i, victim.DHTStats())
		}
	}
	st := victim.DHTStats()
	mh, err := multihash.Sum([]byte("an honest pipe"), multihash.SHA2_256, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := honest.Routing().Provide(ctx, cid.NewCidV1(cid.Raw, mh), true); err != nil {
		t.Fatal(err)
	}
	ps := victim.Routing().(*dht.IpfsDHT).ProviderStore()
	// Not asked for here: a GetProviders now would put it in kad-dht's
	// cache of provider sets, served from there whatever the store kept.
	time.Sleep(time.Second) // Provide returns once it has sent
	// kad-dht holds writes in a buffer of 256, served from there, and
	// writes them to the store when it fills: the attacker's next
	// announcements flush the honest one into the full store.
	a := testutil.NewNode(t)
	if err := a.Connect(ctx, victim.AddrInfo()); err != nil {
		t.Fatal(err)
	}
	floodProviders(t, ctx, a, victim, 256)
	for victim.DHTStats().ProvidersReplaced < st.ProvidersReplaced+256 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	provs, err := ps.GetProviders(ctx, mh)
	if after := victim.DHTStats(); len(provs) == 0 {
		t.Fatalf("after %d peer IDs announced %d made-up keys each (store %+v), the honest peer's one announcement was "+
			"refused (now %+v; providers of its key: %v %v); want room kept for peers holding few records (e.g. a total "+
			"bound shared out among providers, or the newest records of the largest holders dropped first)",
			sybils, each, st, after, provs, err)
	}
	if after := victim.DHTStats(); st.ProviderRecords != 64*4096 || after.ProviderRecords != st.ProviderRecords {
		t.Fatalf("store after the flood %+v, after the honest provide %+v: want it full, and kept so", st, after)
	}
}
