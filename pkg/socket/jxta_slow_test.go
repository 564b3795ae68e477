package socket_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/jxtatest"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// crawlProxy relays TCP connections to target, reading what the dialler
// sends at rate bytes a second (what the target sends back, at once): a
// peer on a slow link, reading steadily. It is closed when the test ends.
func crawlProxy(t *testing.T, target string, rate int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	crawl := func(dst, src net.Conn) {
		buf := make([]byte, rate/20)
		start, total := time.Now(), 0
		for {
			n, err := src.Read(buf)
			total += n
			if _, werr := dst.Write(buf[:n]); werr != nil || err != nil {
				return
			}
			time.Sleep(time.Until(start.Add(time.Duration(total) * time.Second / time.Duration(rate))))
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); crawl(out, in) }()
			go func() { defer wg.Done(); io.Copy(in, out) }()
		}
	}()
	return ln.Addr().String()
}

// TestJXTASlowReaderCloseSucceeds: a JXTA socket whose connection carries
// 100 KB/s (800 kbit/s), its reader reading all it gets, is written
// 3 MiB, then closed; the close, which waits up to 20 s for the last
// blocks' acknowledgements, succeeds, and every byte arrived. Before,
// the connection's writes returned as soon as the kernel's send buffer,
// grown to megabytes, took the bytes, so the writes ended at once and
// the close waited for nearly all 3 MiB (31 s at that pace): "jxtarel:
// blocks sent were not acknowledged: 10 of them: context deadline
// exceeded" (and 12 of 40 blocks sent again, of a 10 MiB transfer,
// while they waited in that buffer). Now a write returns once its bytes
// are all but jxtatcp.DefaultUnsentLimit on their way, and the close
// waits for the last few hundred KiB.
func TestJXTASlowReaderCloseSucceeds(t *testing.T) {
	if testing.Short() {
		t.Skip("a 30 s transfer at 100 KB/s")
	}
	const size = 3 << 20
	sep, _ := jxtatest.NewEndpoint(t, jxtatcp.WithUnsigned())
	_, server := socketsOn(t, sep)
	saddr := sep.JXTA().Addrs()[0]
	hp := saddr[len("tcp://"):]
	proxy := crawlProxy(t, hp, 100_000)
	cep, _ := jxtatest.NewEndpoint(t, jxtatcp.WithUnsigned(), jxtatcp.WithDialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == hp {
			addr = proxy
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}))
	_, client := socketsOn(t, cep)
	a := seeded(t, "jxta-slow-reader")
	l, err := server.Listen(a)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type result struct {
		b   []byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := l.AcceptContext(ctx(t))
		if err != nil {
			got <- result{nil, err}
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(5 * time.Minute))
		b, err := io.ReadAll(c)
		got <- result{b, err}
	}()
	c, err := client.Dial(ctx(t), a, pipe.ToJXTAPeers(saddr))
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("slow but steady "), size/16)
	for b := data; len(b) > 0; b = b[min(len(b), 64<<10):] {
		if _, err := c.Write(b[:min(len(b), 64<<10)]); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatalf("closing after 3 MiB to a reader at 100 KB/s: %v", err)
	}
	st, _ := c.ReliableStats()
	t.Logf("%d blocks sent, %d sent again", st.BlocksSent, st.Retransmitted)
	r := <-got
	if r.err != nil && !errors.Is(r.err, io.EOF) {
		t.Fatalf("the reader: %v", r.err)
	}
	if !bytes.Equal(r.b, data) {
		t.Fatalf("the reader read %d bytes, not the %d written", len(r.b), len(data))
	}
}
