package pipe_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/jxse"
	"github.com/p2pmsg/p2pmsg/internal/jxtatest"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// TestJXSEBiDiPipes: reliable JxtaBiDiPipes with a live JXSE 2.7 peer,
// both roles, through the pipe package's bidirectional pipe API (Connect,
// Listen/Accept, Send, Receive, Close), signed and unsigned.
func TestJXSEBiDiPipes(t *testing.T) {
	if testing.Short() {
		t.Skip("live JXSE peer")
	}
	jxtatest.SigningModes(t, func(t *testing.T, unsigned bool, opts []jxtatcp.Option) {
		name := map[bool]string{false: "signed", true: "unsigned"}[unsigned]
		{
			t.Parallel()
			t0 := time.Now()
			t.Cleanup(func() { t.Logf("all cleaned at %v", time.Since(t0)) })
			peer := jxse.StartPeer(t, jxse.PeerOptions{Unsigned: unsigned})
			s, ident := jxtaPipes(t, opts...)
			t.Cleanup(func() { t.Logf("pipes closed at %v", time.Since(t0)) })
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			if err := peer.Command("route " + ident.ID().String() + " " + s.Endpoint().JXTA().Addrs()[0]); err != nil {
				t.Fatal(err)
			}

			start := time.Now()
			// p2pmsg connects to a JXSE JxtaServerPipe, which echoes.
			there := seededAdv(t, "bidi-there-"+name)
			if err := peer.Command("bidilisten " + there.ID.String()); err != nil {
				t.Fatal(err)
			}
			b, err := s.Connect(ctx, there, pipe.ToJXTAPeers(peer.Addr()))
			if err != nil {
				t.Fatalf("connect: %v; JXSE log: %s", err, peer.Log())
			}
			if b.RemoteJXTAPeerID().String() != peer.ID {
				t.Fatalf("remote %v, want %s", b.RemoteJXTAPeerID(), peer.ID)
			}
			big := strings.Repeat("x", 200<<10) // more than one 64 KiB frame's worth
			texts := []string{"one", "two", big, "three"}
			for _, text := range texts {
				if err := b.Send(ctx, message.New(message.Text("study", "text", text))); err != nil {
					t.Fatal(err)
				}
			}
			got := map[string]bool{}
			for range texts {
				m, err := b.Receive(ctx)
				if err != nil {
					t.Fatalf("%v; JXSE log: %s", err, peer.Log())
				}
				e, _ := m.Get("study", "text")
				got[string(e.Data)] = true
			}
			for _, text := range texts {
				if !got[text] { // JXSE's listener threads may echo out of order
					t.Fatalf("echo of a %d-byte message missing", len(text))
				}
			}
			t.Logf("echoes back at %v", time.Since(start))
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			t.Logf("closed at %v", time.Since(start))
			for {
				r, err := peer.Next(ctx)
				if err != nil {
					t.Fatalf("JXSE never saw the close: %v", err)
				}
				if r.Kind == "BIDI-CLOSED" {
					break
				}
			}

			// JXSE connects to a p2pmsg listener, which echoes.
			here := seededAdv(t, "bidi-here-"+name)
			l, err := s.Listen(here)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			answer := peer.QueryAsync(fmt.Sprintf("bidiconnect %s %s 3", here.ID, ident.ID()))
			a, err := l.Accept(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("accepted at %v", time.Since(start))
			for {
				m, err := a.Receive(ctx)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("%v; JXSE log: %s", err, peer.Log())
				}
				if err := a.Send(ctx, m); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("EOF at %v", time.Since(start))
			a.Close()
			// JXSE's worker threads call a bidi pipe's listener
			// concurrently, so the echoes may reach its listener out of
			// order (as between two JXSE peers: internal/jxse's pair test).
			res := <-answer
			if got := strings.Split(res, ","); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"m1", "m2", "m3"}) {
				t.Fatalf("JXSE answered %q", res)
			}
			if res != "m1,m2,m3" {
				t.Logf("JXSE's listener took the echoes as %s", res)
			}
		}
	})
}
