// Package jxtatcp is JXTA's TCP message transport as JXSE 2.7 speaks it:
// the JXTAHELLO welcome, the message package framing, CBJX message
// signing, and the endpoint address elements every message carries. It
// lets a p2pmsg node exchange endpoint messages with unmodified JXSE 2.7
// peers on their own transport, beside libp2p; package endpoint routes
// jxta:// and tcp:// addresses to it.
//
// The wire is specified in the JXTA wire study (shared/jxta/SPEC.md) and
// checked against captures of JXSE peers and against live JXSE peers.
//
// # Identity
//
// A JXTA peer signs every message with an RSA key and a self-signed X.509
// certificate (CBJX), and its peer ID is derived from that key
// (id.PeerIDFromSPKI). That identity is separate from the node's libp2p
// key: JXSE accepts only RSA certificates, libp2p nodes use Ed25519 keys.
// LoadIdentity keeps it in a file beside the libp2p key.
//
// # Hostile peers
//
// Nothing a peer sends is trusted: a welcome is at most 4 KiB and must
// come within 5 s; frame headers are bounded; a frame's body is read as
// its bytes arrive (a lying length costs only what was sent), within the
// maximum message size and a transport-wide memory budget, of which the
// frames from one remote host, read, in their handlers or held queued
// (Incoming.Hold), hold at most a share (WithHostMemoryBudget): a host
// whose messages wait in a handler or a queue stalls only itself. Room
// is kept for hosts holding little: while other hosts hold part of the
// budget, a host may hold no more than the budget leaves free, so hosts
// at their share do not keep other hosts' frames unread (see
// WithMemoryBudget). Each 64 KiB of a body must come within the frame
// timeout and the whole at MinFrameRate; a slow frame that holds budget
// another frame waits for is cut (see WithMemoryBudget). A signed message whose
// signature does not verify, or whose source address is not its signer's,
// is dropped and counted (Stats), as JXSE does; an unsigned message when
// signatures are required is counted and closes its connection, as JXSE
// does. Malformed framing closes the connection.
//
// Connections are bounded (WithMaxConns) and shared out by remote host,
// as welcomes name peer IDs nothing authenticates: one host opens at
// most a quarter of the slots, peers' connections at most three quarters,
// so this peer's own dials always have room. JXTA has no keep-alives, so
// a new connection that finds no slot gets one that carried no frame for
// 30 s, closed for it (Stats.Evicted; a frame arriving on it as it is
// closed is still read) — never from a host holding fewer connections
// than the newcomer's then will; that peer dials again when
// it next sends, and so does this transport for a connection it had
// dialled, at the same address.
//
// # Writes
//
// A frame's write returns once all but DefaultUnsentLimit of it has been
// sent (TCP_NOTSENT_LOWAT, on Linux; WithUnsentLimit), not once the
// kernel's send buffer, which Linux grows to megabytes, has taken it. So
// a write's deadline (the write timeout plus the frame's length at
// MinFrameRate), and what waits on a Send — package jxtarel's
// retransmission timers, a JXTA socket's close — run at the pace the
// peer reads, and a peer that reads slowly keeps at most that much of
// this peer's bytes unsent per connection.
//
// Which connection a jxta:// send uses is decided against replays. A
// welcome names a peer ID nothing authenticates, and a CBJX signature
// carries no nonce, so a peer Z can replay a frame another peer H signed
// (one H sent to Z) and so claim H, whatever address it gives. A
// connection bound to H keeps H's traffic against a later one only its
// claimant's word recommends (a replayed frame does not move it; see
// bindPeer). And a peer this transport has a route for is sent to at
// that address: the first tcp:// address the application sent to and
// found H at while nothing else served H, or one AddRoute gave. A
// connection dialled there reaches H, as far as TCP tells, whoever
// claims H elsewhere; if nothing listens there (H moved), the send goes
// to another address the application sent to that answered as H, else
// fails (ErrNoRoute, naming the route) rather than go to a connection a
// claimant opened. A peer known only from connections it
// opened (never sent to by tcp://, no route given), or one that
// connected before the application first sent to it, has no route and
// is exposed: a Z that connects while H has no connection here and
// replays H's frame keeps H's traffic as long as it stays. JXTA 1.1 has
// no message that would prove a connection's peer alive and itself.
package jxtatcp
