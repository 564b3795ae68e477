package node

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	ds "github.com/ipfs/go-datastore"
	dssync "github.com/ipfs/go-datastore/sync"
	"github.com/libp2p/go-libp2p-kad-dht/records"
)

// A DHT server keeps the provider records other peers announce, for 48
// hours, and ADD_PROVIDER has no answer: without bounds one peer writing
// announcements for made-up keys grows a server's memory by ~250 bytes a
// record, without end. The bounds below are far above what pipes need (a
// node announces one record per pipe it binds) and keep the store within
// about 64 MiB.
const (
	// maxProvidersPerPeer bounds the records a DHT server keeps for one
	// providing peer: a node binding this many pipes at once is far
	// beyond what applications bind, and a server in a small network
	// holds every record.
	maxProvidersPerPeer = 4096
	// maxProviders bounds the records a DHT server keeps in all: 256 Ki
	// records of ~250 bytes, 64 MiB.
	maxProviders = 256 << 10
)

// DHTStats counts what the node's DHT server keeps for other peers.
type DHTStats struct {
	// ProviderRecords is the provider records stored.
	ProviderRecords int
	// ProvidersRefused counts provider records not stored: their peer
	// already had 4,096, or the store 256 Ki (about 64 MiB).
	ProvidersRefused uint64
}

// DHTStats returns the DHT's counters; zero without WithDHT.
func (n *Node) DHTStats() DHTStats {
	if n.providers == nil {
		return DHTStats{}
	}
	n.providers.mu.Lock()
	defer n.providers.mu.Unlock()
	return DHTStats{ProviderRecords: n.providers.total, ProvidersRefused: n.providers.refused.Load()}
}

// providerStore is the DHT's datastore: a map, whose provider records are
// bounded per providing peer and in all. A record beyond a bound is not
// stored, and counted; one already stored may always be refreshed. It
// refuses by dropping rather than by failing the write, because kad-dht
// writes records in batches that mix peers, and a failed batch would lose
// the other peers' records with it.
type providerStore struct {
	ds.Batching
	mu      sync.Mutex
	byPeer  map[string]int // records by the last component of their key: the provider
	total   int
	refused atomic.Uint64
}

func newProviderStore() *providerStore {
	return &providerStore{Batching: dssync.MutexWrap(ds.NewMapDatastore()), byPeer: map[string]int{}}
}

// provider returns the providing peer named by a provider record's key;
// false for other keys.
func provider(k ds.Key) (string, bool) {
	s := k.String()
	if !strings.HasPrefix(s, records.ProvidersKeyPrefix) {
		return "", false
	}
	return s[strings.LastIndexByte(s, '/')+1:], true
}

func (s *providerStore) Put(ctx context.Context, k ds.Key, v []byte) error {
	p, ok := provider(k)
	if !ok {
		return s.Batching.Put(ctx, k, v)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if has, err := s.Batching.Has(ctx, k); err != nil || has {
		if err != nil {
			return err
		}
		return s.Batching.Put(ctx, k, v)
	}
	if s.byPeer[p] >= maxProvidersPerPeer || s.total >= maxProviders {
		s.refused.Add(1)
		return nil
	}
	if err := s.Batching.Put(ctx, k, v); err != nil {
		return err
	}
	s.byPeer[p]++
	s.total++
	return nil
}

func (s *providerStore) Delete(ctx context.Context, k ds.Key) error {
	p, ok := provider(k)
	if !ok {
		return s.Batching.Delete(ctx, k)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	has, err := s.Batching.Has(ctx, k)
	if err != nil || !has {
		return err
	}
	if err := s.Batching.Delete(ctx, k); err != nil {
		return err
	}
	if s.byPeer[p]--; s.byPeer[p] <= 0 {
		delete(s.byPeer, p)
	}
	s.total--
	return nil
}

// Batch applies a batch's writes through Put and Delete, so the bounds
// hold for them too.
func (s *providerStore) Batch(context.Context) (ds.Batch, error) {
	return ds.NewBasicBatch(s), nil
}
