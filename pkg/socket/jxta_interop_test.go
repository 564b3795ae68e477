package socket_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/jxse"
	"github.com/p2pmsg/p2pmsg/internal/jxtatest"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

// jxtaSockets starts a node that is also a JXTA peer, with its socket
// service; it returns the service and the JXTA peer ID and address.
func jxtaSockets(t testing.TB, opts ...jxtatcp.Option) (*socket.Service, string, string) {
	t.Helper()
	return jxtaSocketsWith(t, opts)
}

// jxtaSocketsWith is jxtaSockets with socket options too.
func jxtaSocketsWith(t testing.TB, opts []jxtatcp.Option, sopts ...socket.Option) (*socket.Service, string, string) {
	t.Helper()
	ep, ident := jxtatest.NewEndpoint(t, opts...)
	_, s := socketsOn(t, ep, sopts...)
	return s, ident.ID().String(), ep.JXTA().Addrs()[0]
}

func seeded(t testing.TB, seed string) *adv.PipeAdvertisement {
	t.Helper()
	pid, err := id.PipeIDFromSeed(id.NetPeerGroupID, []byte(seed))
	if err != nil {
		t.Fatal(err)
	}
	return &adv.PipeAdvertisement{ID: pid, Type: adv.Unicast, Name: seed}
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestJXSESockets: JxtaSockets with a live JXSE 2.7 peer, in both roles
// and both directions, 10 MiB byte-identical each way plus a JXSE write of
// 300,000 bytes in one call (three 64 KiB blocks before the first
// acknowledgement), signed and unsigned.
func TestJXSESockets(t *testing.T) {
	if testing.Short() {
		t.Skip("live JXSE peer")
	}
	const big = 10 << 20
	jxtatest.SigningModes(t, func(t *testing.T, unsigned bool, opts []jxtatcp.Option) {
		name := map[bool]string{false: "signed", true: "unsigned"}[unsigned]
		{
			peer := jxse.StartPeer(t, jxse.PeerOptions{Unsigned: unsigned})
			s, self, addr := jxtaSockets(t, opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if err := peer.Command("route " + self + " " + addr); err != nil {
				t.Fatal(err)
			}
			next := func(kind string) jxse.Received {
				t.Helper()
				for {
					r, err := peer.Next(ctx)
					if err != nil {
						t.Fatalf("%v; JXSE log: %s", err, peer.Log())
					}
					if r.Kind == kind {
						return r
					}
				}
			}

			// p2pmsg dials, writes 10 MiB, closes; JXSE reads it all.
			sink := seeded(t, "sock-sink-"+name)
			if err := peer.Command("socklisten " + sink.ID.String() + " sink"); err != nil {
				t.Fatal(err)
			}
			c, err := s.Dial(ctx, sink, pipe.ToJXTAPeers(peer.Addr()))
			if err != nil {
				t.Fatalf("dial: %v; JXSE log: %s", err, peer.Log())
			}
			data := jxse.Pattern(big)
			start := time.Now()
			if _, err := c.Write(data); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			r := next("SOCK")
			st, _ := c.ReliableStats()
			t.Logf("p2pmsg → JXSE 10 MiB: %.1f MB/s; reliable layer %+v", big/time.Since(start).Seconds()/1e6, st)
			if want := fmt.Sprintf("%d %s", big, sha(data)); r.Text != want {
				t.Fatalf("JXSE read %q, want %q", r.Text, want)
			}

			// p2pmsg dials and reads 10 MiB JXSE writes in one call.
			src := seeded(t, "sock-src-"+name)
			if err := peer.Command(fmt.Sprintf("socklisten %s send:%d", src.ID, big)); err != nil {
				t.Fatal(err)
			}
			c, err = s.Dial(ctx, src, pipe.ToJXTAPeers(peer.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("read %d bytes: %v", len(got), err)
			}
			c.Close()
			if !bytes.Equal(got, data) {
				t.Fatalf("read %d bytes from JXSE, not what it wrote", len(got))
			}

			// JXSE dials p2pmsg and writes: 300,000 bytes, then 10 MiB,
			// each in one write() call.
			here := seeded(t, "sock-here-"+name)
			l, err := s.Listen(here)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for _, n := range []int{300_000, big} {
				answer := peer.QueryAsync(fmt.Sprintf("sockconnect %s %s %d send", here.ID, self, n))
				c, err := l.AcceptContext(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if ra := c.RemoteAddr().(socket.Addr); ra.JXTAPeer.String() != peer.ID {
					t.Fatalf("remote %v, want JXSE peer %s", ra, peer.ID)
				}
				got, err := io.ReadAll(c)
				if err != nil {
					t.Fatalf("read %d of %d bytes: %v", len(got), n, err)
				}
				c.Close()
				if !bytes.Equal(got, jxse.Pattern(n)) {
					t.Fatalf("read %d bytes, want the %d JXSE wrote", len(got), n)
				}
				if res := <-answer; res != sha(got) {
					t.Fatalf("JXSE answered %q", res)
				}
			}

			// JXSE dials p2pmsg and reads 10 MiB p2pmsg writes.
			answer := peer.QueryAsync(fmt.Sprintf("sockconnect %s %s 0 recv", here.ID, self))
			c, err = l.AcceptContext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write(data); err != nil {
				st, _ := c.ReliableStats()
				t.Fatalf("%v; reliable layer %+v; JXSE answered %q; JXSE log: %s", err, st, <-answer, lastLines(peer.Log()))
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if res := <-answer; res != fmt.Sprintf("%d %s", big, sha(data)) {
				t.Fatalf("JXSE answered %q; log: %s", res, lastLines(peer.Log()))
			}
			t.Logf("JXTA socket handshakes: %+v", s.JXTAStats())
		}
	})
}

func lastLines(s string) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// TestJXSEUnreliableSockets: unreliable JxtaSockets (stream=false) with a
// live JXSE 2.7 peer, both roles. JXSE never answers an unreliable
// socket's close: p2pmsg's Close must not wait for it.
func TestJXSEUnreliableSockets(t *testing.T) {
	if testing.Short() {
		t.Skip("live JXSE peer")
	}
	peer := jxse.StartPeer(t, jxse.PeerOptions{})
	s, self, addr := jxtaSocketsWith(t, nil, socket.WithJXTAUnreliable())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := peer.Command("route " + self + " " + addr); err != nil {
		t.Fatal(err)
	}
	const n = 300_000
	data := jxse.Pattern(n)

	// p2pmsg dials JXSE unreliably, writes, and reads JXSE's echo. (JXSE's
	// reader of an unreliable socket gets "Socket Closed" rather than
	// end of stream when the other side closes, so it echoes instead of
	// reading to the end.)
	echo := seeded(t, "usock-echo")
	if err := peer.Command("socklisten " + echo.ID.String() + " echo"); err != nil {
		t.Fatal(err)
	}
	c, err := s.Dial(ctx, echo, pipe.ToJXTAPeers(peer.Addr()))
	if err != nil {
		t.Fatalf("dial: %v; JXSE log: %s", err, lastLines(peer.Log()))
	}
	small := data[:50_000]
	if _, err := c.Write(small); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, len(small))
	if _, err := io.ReadFull(c, back); err != nil || !bytes.Equal(back, small) {
		t.Fatalf("echo: %v (equal %v)", err, bytes.Equal(back, small))
	}
	if st, ok := c.ReliableStats(); !ok || st.BlocksSent == 0 || st.BlocksReceived == 0 || st.AcksReceived != 0 {
		t.Fatalf("unreliable socket's counters: %+v, %v", st, ok)
	}
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close waited %v for a closeACK JXSE never sends", d)
	}

	// JXSE dials p2pmsg unreliably and writes in one call.
	here := seeded(t, "usock-here")
	l, err := s.Listen(here)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	answer := peer.QueryAsync(fmt.Sprintf("sockconnect %s %s %d usend", here.ID, self, n))
	c, err = l.AcceptContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read %d bytes: %v", len(got), err)
	}
	c.Close()
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, want the %d JXSE wrote", len(got), n)
	}
	if res := <-answer; res != sha(got) {
		t.Fatalf("JXSE answered %q", res)
	}
}
