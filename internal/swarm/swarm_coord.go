package swarm

import (
	"context"
	"fmt"
	"sync"
)

// memHub is a Coordinator's rendezvous for peers that run in one
// process: what Testground's sync service is to peers in processes of
// their own.
type memHub struct {
	n      int
	mu     sync.Mutex
	points map[string]*memPoint
}

// memPoint is one named rendezvous: a Share or a Barrier.
type memPoint struct {
	data [][]byte
	got  int
	done chan struct{}
}

func newMemHub(n int) *memHub { return &memHub{n: n, points: map[string]*memPoint{}} }

func (h *memHub) point(name string) *memPoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.points[name]
	if p == nil {
		p = &memPoint{data: make([][]byte, h.n), done: make(chan struct{})}
		h.points[name] = p
	}
	return p
}

// coordinator returns peer seq's Coordinator.
func (h *memHub) coordinator(seq int) Coordinator { return &memCoord{hub: h, seq: seq} }

type memCoord struct {
	hub *memHub
	seq int
}

func (c *memCoord) Seq() int { return c.seq }

func (c *memCoord) Share(ctx context.Context, name string, b []byte) ([][]byte, error) {
	p := c.hub.point("share " + name)
	c.hub.mu.Lock()
	if p.data[c.seq-1] != nil {
		c.hub.mu.Unlock()
		return nil, fmt.Errorf("swarm: peer %d shared %s twice", c.seq, name)
	}
	p.data[c.seq-1] = append([]byte{}, b...)
	if p.got++; p.got == c.hub.n {
		close(p.done)
	}
	c.hub.mu.Unlock()
	select {
	case <-p.done:
		return p.data, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("swarm: share %s: %w", name, ctx.Err())
	}
}

func (c *memCoord) Barrier(ctx context.Context, name string) error {
	_, err := c.Share(ctx, "barrier "+name, nil)
	return err
}
