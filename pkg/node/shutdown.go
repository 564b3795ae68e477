package node

import (
	"context"
	"fmt"
	"sync"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
	msmux "github.com/multiformats/go-multistream"

	"github.com/p2pmsg/p2pmsg/internal/joinerr"
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
// stream on each connection (relayed ones too) and negotiates libp2p's
// ping protocol on it, and closes the connection once the peer answered
// (the protocol, a refusal or a reset of the stream: any answer), or when
// ctx ends.
//
// On yamux (TCP, WebSocket) that answer is a guarantee: the peer reads a
// connection's frames in order, so it answers after it read every frame
// the node wrote before, and closing can no longer take those back (the
// node's yamux, on the peer's side too, hands a stream's data to its
// reader even when the connection ends under it). QUIC streams (and
// WebTransport's, and WebRTC's) carry no order between them: there the
// answer shows that the peer received, barring loss, what was sent
// before it, and gave its application the time of a round trip through
// its host to read it: enough for a reader already waiting for it, as a
// Flush waits for its stream's end; a reader that comes to it later finds
// it gone once the connection closes.
//
// What Shutdown waits for is the peer's muxer, not its handlers: a
// stream the peer's host is still negotiating when the connection closes
// (go-libp2p negotiates lazily, with a stream's first write, and its
// host does so beside everything else) is dropped, its handler never
// called, though its data arrived whole. A writer that must know its
// stream was taken reads something back from the peer's handler first:
// an answer, or the peer's end of the stream, as the endpoint's Flush
// does.
//
// Shutdown returns an error, joined with Close's, when it closed a
// connection before its peer answered: ctx's if it ended first, or why
// the node could not ask (a stream its memory or stream limits refused:
// a node whose memory is full cannot confirm). Writes that begin after
// Shutdown was called are not waited for: stop the services writing
// first (the endpoint's Shutdown, for one, drains its queues and lets its
// senders finish).
func (n *Node) Shutdown(ctx context.Context) error {
	conns := n.host.Network().Conns()
	if cause := context.Cause(ctx); cause != nil && len(conns) > 0 {
		// The layers above took the whole ctx: no peer was asked.
		what := "connections"
		if len(conns) == 1 {
			what = "connection"
		}
		return joinerr.Join(fmt.Errorf("node: shutdown: its ctx ended before it began; %d %s closed without asking: %w", len(conns), what, cause), n.Close())
	}
	var (
		wg          sync.WaitGroup
		mu          sync.Mutex
		unconfirmed int
		first       error
	)
	for _, c := range conns {
		wg.Go(func() {
			if err := awaitAnswer(ctx, c); err != nil {
				mu.Lock()
				unconfirmed++
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	var err error
	if unconfirmed > 0 {
		what := "connections closed before their peers"
		if unconfirmed == 1 {
			what = "connection closed before its peer"
		}
		err = fmt.Errorf("node: shutdown: %d %s answered: %w", unconfirmed, what, first)
	}
	return joinerr.Join(err, n.Close())
}

// awaitAnswer opens a stream on c, relayed (limited) connections
// included, and negotiates libp2p's ping protocol on it (it sends no
// ping: the negotiation's round trip is all Shutdown needs). Any answer,
// a refusal or a reset of the stream included, returns nil, as does c's
// end (nothing is left to wait for on it); ctx's end returns ctx's error,
// and a stream the node may not open (its memory or stream limits) the
// reason.
func awaitAnswer(ctx context.Context, c network.Conn) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	st, err := c.NewStream(network.WithAllowLimitedConn(ctx, "shutdown"))
	if err != nil {
		if cerr := context.Cause(ctx); cerr != nil {
			return cerr
		}
		if c.IsClosed() {
			return nil
		}
		return fmt.Errorf("opening a stream to %s: %w", c.RemotePeer(), err)
	}
	stop := context.AfterFunc(ctx, func() { st.Reset() })
	defer stop()
	msmux.SelectProtoOrFail(ping.ID, st)
	st.Reset()
	return context.Cause(ctx)
}
