// Package p2pmsg starts a whole p2pmsg peer with one call: New builds the
// node (package node, the libp2p host), the endpoint service on it (package
// endpoint), the pipe service on that (package pipe) and the socket service
// on the pipes (package socket) from one set of options, and Peer.Close
// stops all four, in the reverse order. Peer.Shutdown stops them as a peer
// that is done should: what it queued is written out, the peers sending
// to it finish their streams, and each connection closes once its peer
// has read what was written on it, so that their Flush calls succeed.
//
// It is the top of the module's layering: it imports those packages and
// nothing under pkg/ or internal/ imports it (internal/layering checks).
// It adds no messaging of its own. Pipes and sockets are used through the
// services Peer hands out (Pipes, Sockets), and every option of the layers
// below remains reachable (WithNodeOptions, WithEndpointOptions,
// WithPipeOptions, WithSocketOptions). An application that needs the layers
// on their own, or only some of them, builds them with those packages.
package p2pmsg
