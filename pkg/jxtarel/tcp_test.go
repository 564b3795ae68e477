package jxtarel_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/jxtarel"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

// tcpEnd carries one Conn's messages over a real TCP connection, each
// as its encoding after its length, as a transport writes frames: one
// write at a time, within the ctx of the send.
type tcpEnd struct {
	nc      net.Conn
	mu      sync.Mutex
	writing chan struct{} // closed when the first write begins
	once    sync.Once
}

func (e *tcpEnd) send(ctx context.Context, m *message.Message) error {
	b, err := wire.Marshal(m)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.once.Do(func() { close(e.writing) })
	stop := context.AfterFunc(ctx, func() { e.nc.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	_, err = e.nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...))
	return err
}

// deliver hands c every message read from nc, once start is closed,
// until nc ends.
func deliver(nc net.Conn, c *jxtarel.Conn, start <-chan struct{}) {
	<-start
	br := bufio.NewReader(nc)
	for {
		var n [4]byte
		if _, err := io.ReadFull(br, n[:]); err != nil {
			return
		}
		b := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		m, err := wire.Unmarshal(b)
		if err != nil {
			return
		}
		c.Handle(m)
	}
}

// TestNoTimeoutWhileItsSendWaits: a block's retransmission timeout runs
// from when the SendFunc returns with it, not from before: over a real
// TCP connection whose reader has stopped, the write of a block larger
// than the sockets' buffers waits, and the block was due again after
// 1 s (the initial timeout) while still being written, to be sent again
// right behind itself (the connection's writes take turns): 45% of the
// blocks of a JXTA socket to a peer reading at 100 KB/s were sent
// twice. Nothing is sent again while the write waits; once the reader
// reads, the block arrives and is acknowledged.
func TestNoTimeoutWhileItsSendWaits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	noErr(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- nc
	}()
	wc, err := net.Dial("tcp", ln.Addr().String())
	noErr(t, err)
	defer wc.Close()
	rc, ok := <-accepted
	check(t, ok, "the connection accepted")
	defer rc.Close()
	// Fixed buffers, so that no autotuning makes room for the block.
	noErr(t, wc.(*net.TCPConn).SetWriteBuffer(64<<10))
	noErr(t, rc.(*net.TCPConn).SetReadBuffer(64<<10))

	ea := &tcpEnd{nc: wc, writing: make(chan struct{})}
	eb := &tcpEnd{nc: rc, writing: make(chan struct{})}
	a, err := jxtarel.New(ea.send)
	noErr(t, err)
	defer a.Close()
	b, err := jxtarel.New(eb.send)
	noErr(t, err)
	defer b.Close()
	now, resume := make(chan struct{}), make(chan struct{})
	close(now)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); deliver(wc, a, now) }()
	go func() { defer readers.Done(); deliver(rc, b, resume) }()
	defer readers.Wait()
	defer rc.Close()
	defer wc.Close()
	var resumed sync.Once
	defer resumed.Do(func() { close(resume) })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	payload := bytes.Repeat([]byte("block "), (4<<20)/6) // ~4 MiB, far beyond the buffers
	sent := make(chan error, 1)
	go func() { sent <- a.Send(ctx, payload) }()
	<-ea.writing
	// Three initial timeouts while the write waits for a reader that
	// does not read.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if n := a.Stats().Retransmitted; n > 0 {
			t.Fatalf("block sent again %d times while its first write still waited for the reader", n)
		}
	}
	select {
	case err := <-sent:
		t.Fatalf("Send returned (%v) while the reader read nothing", err)
	default:
	}
	resumed.Do(func() { close(resume) })
	noErr(t, <-sent)
	got, err := b.Receive(ctx)
	noErr(t, err)
	check(t, bytes.Equal(got, payload), "the block arrived whole")
	noErr(t, a.Drain(ctx))
}
