package p2pmsg_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/p2pmsg/p2pmsg"
	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

// TestCloseEndsBlockedSend checks what a service shutting down sees:
// a Send held by a receiver that does not read, and a Flush waiting
// behind it, both return when the sending peer closes, with errors that
// match the pipe's ErrClosed, not a stream deadline. (The pipe's Close,
// which comes first, cuts them short, not the endpoint's.)
func TestCloseEndsBlockedSend(t *testing.T) {
	ctx := testContext(t)
	receiver := newPeer(t, p2pmsg.WithPipeOptions(pipe.WithQueueLen(1)))
	sender, err := p2pmsg.New(ctx, p2pmsg.WithListenAddrs(loopback))
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	out, sent := blockedSend(t, ctx, sender, receiver)
	flushed := make(chan error, 1)
	go func() { flushed <- out.Flush(ctx) }()
	testutil.WaitBlocked(t, "endpoint.(*sender).flush", false)

	if err := sender.Close(); err != nil {
		t.Fatal(err)
	}
	for what, ch := range map[string]<-chan error{"Send": sent, "Flush": flushed} {
		err := <-ch
		if !errors.Is(err, pipe.ErrClosed) {
			t.Errorf("%s under Close: %v, want it to match pipe.ErrClosed", what, err)
		}
	}
}

// blockedSend has sender send three messages on a unicast pipe to
// receiver (made with a queue of 1), which never receives: the first
// fills the input's queue, the second holds the receiver's reader, and
// the third, larger than a stream's flow-control window can ever hold
// (yamux's is at most 16 MiB), cannot finish until the receiver reads.
// It returns once that third Send is under way, with the channel its
// error comes on.
func blockedSend(t *testing.T, ctx context.Context, sender, receiver *p2pmsg.Peer) (*pipe.OutputPipe, <-chan error) {
	t.Helper()
	a, _ := adv.New(adv.Unicast, "stalled", "")
	if _, err := receiver.Pipes().NewInputPipe(a); err != nil { // never received from
		t.Fatal(err)
	}
	out, err := sender.Pipes().NewOutputPipe(ctx, a, pipe.ToPeers(receiver.AddrInfo()))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := out.Send(ctx, message.New(message.Text("", "n", "x"))); err != nil {
			t.Fatal(err)
		}
	}
	sent := make(chan error, 1)
	go func() { sent <- out.Send(ctx, message.New(message.Bytes("", "big", make([]byte, 32<<20)))) }()
	testutil.WaitBlocked(t, "endpoint.writeLarge", false)
	return out, sent
}

// TestSendWhenPeerGoes checks what a service sees when the peer it sends
// to goes away under a Send held by that peer's full queue: the Send
// fails with an error matching pipe.ErrPeerGone (and endpoint.ErrPeerGone),
// which a service can retry on, and the next Send resolves again.
func TestSendWhenPeerGoes(t *testing.T) {
	ctx := testContext(t)
	sender := newPeer(t)
	receiver, err := p2pmsg.New(ctx, p2pmsg.WithListenAddrs(loopback), p2pmsg.WithPipeOptions(pipe.WithQueueLen(1)))
	if err != nil {
		t.Fatal(err)
	}
	defer receiver.Close()
	out, sent := blockedSend(t, ctx, sender, receiver)

	if err := receiver.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-sent; !errors.Is(err, pipe.ErrPeerGone) || !errors.Is(err, endpoint.ErrPeerGone) {
		t.Fatalf("Send when the peer went away: %v, want it to match pipe.ErrPeerGone and endpoint.ErrPeerGone", err)
	}
	if err := out.Send(ctx, message.New(message.Text("", "n", "x"))); !errors.Is(err, pipe.ErrNotResolved) {
		t.Fatalf("Send after the peer went away: %v, want pipe.ErrNotResolved", err)
	}
}

// TestBidiSendCutShort checks a bidirectional pipe's Send held by an
// other end that does not receive: when this peer closes, it fails with
// pipe.ErrClosed (and the Flush waiting behind it too); when the other
// end's peer closes, with pipe.ErrPeerGone, as an output pipe's Send.
func TestBidiSendCutShort(t *testing.T) {
	tests := []struct {
		name    string
		closing func(sender, receiver *p2pmsg.Peer) *p2pmsg.Peer
		wantErr error
	}{
		{"this peer closes", func(s, _ *p2pmsg.Peer) *p2pmsg.Peer { return s }, pipe.ErrClosed},
		{"the other peer closes", func(_, r *p2pmsg.Peer) *p2pmsg.Peer { return r }, pipe.ErrPeerGone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			sender := newPeer(t)
			receiver := newPeer(t, p2pmsg.WithPipeOptions(pipe.WithQueueLen(1)))
			a, _ := adv.New(adv.Unicast, "rpc", "")
			l, err := receiver.Pipes().Listen(a)
			if err != nil {
				t.Fatal(err)
			}
			accepted := make(chan error, 1)
			go func() { _, err := l.Accept(ctx); accepted <- err }() // never received from
			b, err := sender.Pipes().Connect(ctx, a, pipe.ToPeers(receiver.AddrInfo()))
			if err != nil {
				t.Fatal(err)
			}
			if err := <-accepted; err != nil {
				t.Fatal(err)
			}
			// As in TestCloseEndsBlockedSend: the third Send cannot finish.
			small := message.New(message.Text("", "n", "x"))
			for range 2 {
				if err := b.Send(ctx, small); err != nil {
					t.Fatal(err)
				}
			}
			sent := make(chan error, 1)
			go func() { sent <- b.Send(ctx, message.New(message.Bytes("", "big", make([]byte, 32<<20)))) }()
			testutil.WaitBlocked(t, "endpoint.writeLarge", false)
			flushed := make(chan error, 1)
			go func() { flushed <- b.Flush(ctx) }()
			testutil.WaitBlocked(t, "endpoint.(*sender).flush", false)

			if err := tt.closing(sender, receiver).Close(); err != nil {
				t.Fatal(err)
			}
			if err := <-sent; !errors.Is(err, tt.wantErr) {
				t.Errorf("Send: %v, want %v", err, tt.wantErr)
			}
			if err := <-flushed; tt.wantErr == pipe.ErrClosed && !errors.Is(err, pipe.ErrClosed) {
				t.Errorf("Flush: %v, want %v", err, pipe.ErrClosed)
			}
		})
	}
}

// TestCloseEndsSocketIO checks that a socket's Read and Write blocked
// when their own peer closes return with net.ErrClosed, as after the
// Conn's own Close: Close ends every connection, open sockets included.
func TestCloseEndsSocketIO(t *testing.T) {
	ctx := testContext(t)
	server := newPeer(t)
	client, err := p2pmsg.New(ctx, p2pmsg.WithListenAddrs(loopback))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	a, _ := adv.New(adv.Unicast, "files", "")
	l, err := server.Sockets().Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Sockets().Dial(ctx, a, pipe.ToPeers(server.AddrInfo()))
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.AcceptContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close() // never read: the client's writes fill the window
	read, wrote := make(chan error, 1), make(chan error, 1)
	go func() { _, err := c.Read(make([]byte, 1)); read <- err }()
	go func() {
		b := make([]byte, 1<<20)
		for {
			if _, err := c.Write(b); err != nil {
				wrote <- err
				return
			}
		}
	}()
	testutil.WaitBlocked(t, "socket.(*Conn).Read", false)
	testutil.WaitBlocked(t, "socket.(*Conn).Write", false)

	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	for what, ch := range map[string]chan error{"Read": read, "Write": wrote} {
		if err := <-ch; !errors.Is(err, net.ErrClosed) {
			t.Errorf("%s under its peer's Close: %v, want net.ErrClosed", what, err)
		}
	}
}

// TestShutdownLetsSendersFlush checks what Shutdown is for: a peer that
// received every message and shuts down lets the sender's Flush learn
// that they were delivered. The receiver is busy writing to the sender
// on another stream meanwhile, so that on TCP the end of the sender's
// stream, which the Flush waits for, queues behind its frames. With the
// endpoint's Shutdown and Close in Peer.Shutdown's place, the Flush fails
// (stream reset) within a few rounds, on TCP and on QUIC.
//
// On QUIC the closing connection can still take the stream's end from a
// sender whose reader had not taken it yet (node.Node.Shutdown: QUIC
// orders nothing between streams, and the peer's quic-go drops what its
// application has not read): under load that lost a round now and then
// in CI, the Flush failing with the connection's close ("Application
// error 0x0 (remote)"). Such rounds are logged, not failed; a stream
// reset fails the test on both.
func TestShutdownLetsSendersFlush(t *testing.T) {
	const rounds, msgs = 10, 20
	for _, listen := range []string{loopback, "/ip4/127.0.0.1/udp/0/quic-v1"} {
		t.Run(listen, func(t *testing.T) {
			ctx := testContext(t)
			cut := 0
			for round := range rounds {
				receiver := newPeer(t, p2pmsg.WithListenAddrs(listen))
				sender := newPeer(t, p2pmsg.WithListenAddrs(listen))
				err := shutdownFlushRound(t, ctx, receiver, sender, msgs, round)
				switch {
				case err == nil:
				case listen != loopback && strings.Contains(err.Error(), "Application error 0x0 (remote)"): // quic-go's text for the peer's Close
					cut++
					t.Logf("round %d: the connection's close took the stream's end from the sender: %v", round, err)
				default:
					t.Fatalf("round %d: the sender's Flush: %v", round, err)
				}
			}
			if cut == rounds {
				t.Fatalf("every round's Flush failed with the connection's close")
			}
		})
	}
}

// shutdownFlushRound runs one round and returns the sender's Flush's
// error.
func shutdownFlushRound(t *testing.T, ctx context.Context, receiver, sender *p2pmsg.Peer, msgs, round int) error {
	t.Helper()
	var bulkRead atomic.Int64
	sender.Node().Host().SetStreamHandler("/test/bulk", func(s network.Stream) {
		buf := make([]byte, 64<<10)
		for {
			n, err := s.Read(buf)
			bulkRead.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	a, _ := adv.New(adv.Unicast, "flushed", "")
	in, err := receiver.Pipes().NewInputPipe(a)
	if err != nil {
		t.Fatal(err)
	}
	out, err := sender.Pipes().NewOutputPipe(ctx, a, pipe.ToPeers(receiver.AddrInfo()))
	if err != nil {
		t.Fatal(err)
	}
	for range msgs {
		if err := out.Send(ctx, message.New(message.Text("", "text", "hello"))); err != nil {
			t.Fatal(err)
		}
	}
	for range msgs {
		if _, err := in.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	bulk, err := receiver.Node().Host().NewStream(ctx, sender.ID(), "/test/bulk")
	if err != nil {
		t.Fatal(err)
	}
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		buf := make([]byte, 64<<10)
		for {
			if _, err := bulk.Write(buf); err != nil {
				return
			}
		}
	}()
	testutil.WaitFor(t, "the bulk stream to flow", func() bool { return bulkRead.Load() > 0 })

	flushed := make(chan error, 1)
	go func() { flushed <- out.Flush(ctx) }()
	if err := receiver.Shutdown(ctx); err != nil {
		t.Fatalf("round %d: Shutdown: %v", round, err)
	}
	ferr := <-flushed
	<-wrote
	if err := receiver.Close(); err != nil { // after Shutdown: nothing to do
		t.Fatalf("round %d: Close after Shutdown: %v", round, err)
	}
	return ferr
}

// TestShutdownEndsOpenSockets: a peer that shuts down with sockets still
// open (accepted or dialled, written to, never closed) ends their
// writing first, so the other side reads every byte, then io.EOF, though
// it reads only after the connection closed. Before, the node's close
// reset those streams, and the other side's Read failed ("stream reset")
// rather than ending, after what had arrived or before it; and the
// transport's close cut a JXTA socket off (jxtarel: the peer can no
// longer be reached) before its blocks were acknowledged. On yamux and
// JXTA: QUIC discards what a stream's reader had not taken when its
// connection closes (node.Node.Shutdown).
func TestShutdownEndsOpenSockets(t *testing.T) {
	for _, tc := range []struct {
		name           string
		server, client []p2pmsg.Option
		jxta           bool
	}{
		{"libp2p", nil, nil, false},
		{"JXTA", []p2pmsg.Option{p2pmsg.WithJXTA(jxtaIdentity(t), "tcp://127.0.0.1:0")}, []p2pmsg.Option{p2pmsg.WithJXTA(jxtaIdentity(t), "")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			server := newPeer(t, append(tc.server, p2pmsg.WithListenAddrs(loopback))...)
			client := newPeer(t, append(tc.client, p2pmsg.WithListenAddrs(loopback))...)
			c, sc := openSocket(t, client, server, tc.jxta)
			want := bytes.Repeat([]byte("data"), 16<<10) // 64 KiB: within the stream's window, read or not
			if _, err := sc.Write(want); err != nil {
				t.Fatal(err)
			}
			// The client reads nothing until the server is gone; on JXTA,
			// whose close waits until the other side's application has taken
			// every block, it reads as it goes.
			type result struct {
				b   []byte
				err error
			}
			read := make(chan result, 1)
			readAll := func() {
				c.SetReadDeadline(time.Now().Add(40 * time.Second))
				b, err := io.ReadAll(c)
				read <- result{b, err}
			}
			if tc.jxta {
				go readAll()
			}
			if err := server.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if !tc.jxta {
				readAll()
			}
			if r := <-read; r.err != nil || !bytes.Equal(r.b, want) {
				t.Fatalf("read %d of the %d bytes written before the server's Shutdown, then %v; want them all, then io.EOF", len(r.b), len(want), r.err)
			}
		})
	}
}

// TestCloseEndsJXTASockets: a peer's Close ends the JXTA sockets still
// open on it, as its node's close ends libp2p ones: a Read waiting on one
// fails with ErrClosed, and its goroutines end (TestMain's leak check)
// without the application's Close. Before, the Read waited 17 s, until
// the reliable layer gave its peer up, then failed with ErrReset
// ("endpoint: service closed"), and the goroutines waited for the
// application's Close.
func TestCloseEndsJXTASockets(t *testing.T) {
	ctx := testContext(t)
	server := newPeer(t, p2pmsg.WithJXTA(jxtaIdentity(t), "tcp://127.0.0.1:0"))
	client := newPeer(t, p2pmsg.WithJXTA(jxtaIdentity(t), ""))
	_, sc := openSocket(t, client, server, true)
	read := make(chan error, 1)
	go func() {
		_, err := sc.Read(make([]byte, 1))
		read <- err
	}()
	if err := server.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-read:
		if !errors.Is(err, socket.ErrClosed) {
			t.Fatalf("Read on a socket of a closed peer: %v, want ErrClosed", err)
		}
	case <-ctx.Done():
		t.Fatal("Read on a socket of a closed peer still waits")
	}
}

// openSocket connects a socket from client to server on a pipe of its
// own, over JXTA TCP if jxta; the dialled end is closed when the test
// ends.
func openSocket(t *testing.T, client, server *p2pmsg.Peer, jxta bool) (c *socket.Conn, sc net.Conn) {
	t.Helper()
	a, _ := adv.New(adv.Unicast, t.Name(), "")
	l, err := server.Sockets().Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	to := pipe.ToPeers(server.AddrInfo())
	if jxta {
		to = pipe.ToJXTAPeers(server.Endpoint().JXTA().Addrs()[0])
	}
	c, err = client.Sockets().Dial(testContext(t), a, to)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if sc = <-accepted; sc == nil {
		t.FailNow()
	}
	return c, sc
}
