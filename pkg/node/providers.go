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
// node announces one record per pipe it binds) and keep the store
// of the order of 64 MiB.
const (
	// maxProvidersPerPeer bounds the records a DHT server keeps for one
	// providing peer: a node binding this many pipes at once is far
	// beyond what applications bind, and a server in a small network
	// holds every record.
	maxProvidersPerPeer = 4096
	// maxProviders bounds the records a DHT server keeps in all: 256 Ki
	// records of ~250 bytes (measured with kad-dht's own structures),
	// 64 MiB, and an index of their keys.
	maxProviders = 256 << 10
)

// DHTStats counts what the node's DHT keeps for other peers and what it
// refuses them.
type DHTStats struct {
	// ProviderRecords is the provider records stored.
	ProviderRecords int
	// ProvidersRefused counts provider records not stored: their peer
	// already had 4,096, or the store 256 Ki (of the order of 64 MiB) and their
	// peer as many as any other.
	ProvidersRefused uint64
	// ProvidersReplaced counts records dropped, the store full, for a
	// record of a peer holding fewer.
	ProvidersReplaced uint64
	// RoutingRefused counts the times a peer was refused a place in the
	// routing table because its host held MaxRoutingPeersPerHost (a peer
	// is refused again each time the DHT finds it anew).
	RoutingRefused uint64
}

// DHTStats returns the DHT's counters; zero without WithDHT.
func (n *Node) DHTStats() DHTStats {
	if n.providers == nil {
		return DHTStats{}
	}
	n.providers.mu.Lock()
	defer n.providers.mu.Unlock()
	return DHTStats{ProviderRecords: n.providers.total, ProvidersRefused: n.providers.refused.Load(),
		ProvidersReplaced: n.providers.replaced.Load(), RoutingRefused: n.routing.refused.Load()}
}

// providerStore is the DHT's datastore: a map, whose provider records are
// bounded per providing peer and in all. A record beyond its peer's bound
// is not stored, and counted; one already stored may always be
// refreshed. When the store is full, a record of a peer holding fewer
// than the peer holding most takes the place of one of that peer's, so
// that peer IDs made by the thousand, each at its bound, cannot keep a
// peer announcing its few pipes out. It refuses by dropping rather than
// by failing the write, because kad-dht writes records in batches that
// mix peers, and a failed batch would lose the other peers' records with
// it.
type providerStore struct {
	ds.Batching
	mu sync.Mutex
	// byPeer holds each provider's record keys, by the last component of
	// their key: the provider; holding[n] the providers holding n, most
	// the largest n with any.
	byPeer   map[string]map[ds.Key]struct{}
	holding  []map[string]struct{}
	most     int
	total    int
	refused  atomic.Uint64
	replaced atomic.Uint64
}

func newProviderStore() *providerStore {
	return &providerStore{Batching: dssync.MutexWrap(ds.NewMapDatastore()), byPeer: map[string]map[ds.Key]struct{}{},
		holding: make([]map[string]struct{}, maxProvidersPerPeer+1)}
}

// count moves p, which holds n records, to n+d. Under s.mu.
func (s *providerStore) count(p string, n, d int) {
	if n > 0 {
		delete(s.holding[n], p)
	}
	if n+d > 0 {
		if s.holding[n+d] == nil {
			s.holding[n+d] = map[string]struct{}{}
		}
		s.holding[n+d][p] = struct{}{}
	}
	s.most = max(s.most, n+d)
	for s.most > 0 && len(s.holding[s.most]) == 0 {
		s.most--
	}
	s.total += d
}

// add records k as one of p's. Under s.mu.
func (s *providerStore) add(p string, k ds.Key) {
	keys := s.byPeer[p]
	if keys == nil {
		keys = map[ds.Key]struct{}{}
		s.byPeer[p] = keys
	}
	keys[k] = struct{}{}
	s.count(p, len(keys)-1, 1)
}

// remove forgets k, one of p's. Under s.mu.
func (s *providerStore) remove(p string, k ds.Key) {
	keys := s.byPeer[p]
	delete(keys, k)
	if len(keys) == 0 {
		delete(s.byPeer, p)
	}
	s.count(p, len(keys)+1, -1)
}

// makeRoom deletes a record of a peer holding most, for a peer holding n.
// Under s.mu.
func (s *providerStore) makeRoom(ctx context.Context, n int) bool {
	if n+1 >= s.most {
		return false
	}
	for p := range s.holding[s.most] {
		for k := range s.byPeer[p] {
			if err := s.Batching.Delete(ctx, k); err != nil {
				return false
			}
			s.remove(p, k)
			s.replaced.Add(1)
			return true
		}
	}
	return false
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
	n := len(s.byPeer[p])
	if n >= maxProvidersPerPeer || s.total >= maxProviders && !s.makeRoom(ctx, n) {
		s.refused.Add(1)
		return nil
	}
	if err := s.Batching.Put(ctx, k, v); err != nil {
		return err
	}
	s.add(p, k)
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
	s.remove(p, k)
	return nil
}

// Batch applies a batch's writes through Put and Delete, so the bounds
// hold for them too.
func (s *providerStore) Batch(context.Context) (ds.Batch, error) {
	return ds.NewBasicBatch(s), nil
}
