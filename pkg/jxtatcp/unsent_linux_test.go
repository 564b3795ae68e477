package jxtatcp

import (
	"bufio"
	"context"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// TestUnsentBytesBounded: a peer that reads steadily but slowly (64 KiB
// every 50 ms, about 1.3 MB/s) is sent an 8 MiB message; while the write
// goes on, the bytes this end's kernel holds unsent on the connection
// stay within DefaultUnsentLimit, give or take one segment, so the write,
// its deadline and what waits on it follow the bytes onto the wire.
// Before, the send buffer took megabytes at once (Linux grows it to
// 4 MiB by default) and the write returned long before the bytes left.
func TestUnsentBytesBounded(t *testing.T) {
	addr := welcomedPeer(t, otherIdent.ID().String(), func(_ net.Conn, br *bufio.Reader) {
		buf := make([]byte, 64<<10)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			if _, err := io.ReadFull(br, buf); err != nil {
				return
			}
		}
	})
	tr, err := New(testIdent, func(*Incoming) {})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sent := make(chan error, 1)
	go func() {
		sent <- tr.Send(ctx, addr, "Svc", "", message.New(message.Bytes("", "big", make([]byte, 8<<20))))
	}()
	most := -1
	for done := false; !done; {
		select {
		case err := <-sent:
			if err != nil {
				t.Fatalf("an 8 MiB message to a peer reading steadily: %v", err)
			}
			done = true
		case <-time.After(10 * time.Millisecond):
		}
		tr.mu.Lock()
		for c := range tr.conns {
			most = max(most, unsentBytes(c.nc))
		}
		tr.mu.Unlock()
	}
	t.Logf("at most %d bytes unsent in the kernel", most)
	if bound := 2 * DefaultUnsentLimit; most > bound {
		t.Fatalf("%d bytes were unsent in the kernel at once, more than %d (twice DefaultUnsentLimit)", most, bound)
	}
	if most < 0 {
		t.Fatal("the bytes unsent could not be read")
	}
}

// unsentBytes reports the bytes nc's kernel holds that were not yet sent
// (SIOCOUTQNSD), or -1 where that cannot be read.
func unsentBytes(nc net.Conn) int {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	raw.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCOUTQNSD); err == nil {
			n = v
		}
	})
	return n
}
