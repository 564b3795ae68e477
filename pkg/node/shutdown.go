package node

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
	msmux "github.com/multiformats/go-multistream"
)

// Shutdown closes the node once what it wrote on its connections has
// reached the peers, or when ctx ends, whichever comes first.
//
// Close ends every connection at once. On TCP and WebSocket, yamux then
// drops the frames still queued for its writer, and a peer loses those it
// had received but not yet read when its kernel gets the reset ours
// answers its next packet with; on QUIC, the peer's quic-go discards what
// its application has not read yet. Among them, say, is the end of a
// stream that the peer's Flush waits for (package endpoint), which then
// fails although every message was delivered. So Shutdown first opens a
// stream on each connection and negotiates libp2p's ping protocol on it,
// and closes the connection once the peer answered (the protocol, a
// refusal or a reset of the stream: any answer), or when ctx ends.
//
// On yamux (TCP, WebSocket) that answer is a guarantee: the peer reads a
// connection's frames in order, so it answers after it read every frame
// the node wrote before, and closing can no longer take those back (the
// node's yamux, on the peer's side too, hands a stream's data to its
// reader even when the connection ends under it). QUIC streams (and
// WebTransport's, and WebRTC's) carry no order between them: there the
// answer shows that the peer received, barring loss, what was sent
// before it, and gave its application the time of a round trip through
// its host to read it, which in practice it has.
//
// Shutdown returns ctx's error if it ended before every peer answered,
// joined with Close's. Writes that begin after Shutdown was called are not
// waited for: stop the services writing first (the endpoint's Shutdown,
// for one, drains its queues and lets its senders finish).
func (n *Node) Shutdown(ctx context.Context) error {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		waiting int // connections whose peer had not answered when ctx ended
	)
	for _, c := range n.host.Network().Conns() {
		wg.Go(func() {
			if !awaitAnswer(ctx, c) {
				mu.Lock()
				waiting++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	var err error
	if waiting > 0 {
		err = fmt.Errorf("node: shutdown: %d connections closed before their peers answered: %w", waiting, context.Cause(ctx))
	}
	return errors.Join(err, n.Close())
}

// awaitAnswer opens a stream on c and negotiates libp2p's ping protocol on
// it (it sends no ping: the negotiation's round trip is all Shutdown
// needs). It reports false if ctx ended first; any other end (an answer,
// a refusal, a reset, the connection gone, a stream the node may not
// open) leaves nothing to wait for.
func awaitAnswer(ctx context.Context, c network.Conn) bool {
	if ctx.Err() != nil {
		return false
	}
	st, err := c.NewStream(ctx)
	if err != nil {
		return ctx.Err() == nil
	}
	stop := context.AfterFunc(ctx, func() { st.Reset() })
	defer stop()
	msmux.SelectProtoOrFail(ping.ID, st)
	st.Reset()
	return ctx.Err() == nil
}
