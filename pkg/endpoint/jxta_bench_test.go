package endpoint_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/jxse"
	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
)

// BenchmarkJXSERoundTrip measures the endpoint round trip of a 1-byte
// message with a live JXSE 2.7 peer's echo listener, signed as JXSE
// signs by default: from p2pmsg (p2pmsg-jxse) and, as the reference,
// from a second JXSE peer (jxse-jxse). The request goes to the echo's
// tcp:// address, the answer comes back routed to the sender's peer ID.
// p50-ns is the median round trip.
func BenchmarkJXSERoundTrip(b *testing.B) {
	echo := jxse.StartPeer(b, jxse.PeerOptions{})
	to := echo.Addr() + "/StudySvc/echo"
	b.Run("p2pmsg-jxse", func(b *testing.B) {
		ident, err := jxtatcp.NewIdentity()
		if err != nil {
			b.Fatal(err)
		}
		nodes := testutil.NewConnectedNodes(b, 1)
		s, err := endpoint.New(nodes[0], endpoint.WithJXTA(ident, ""))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		got := make(chan struct{}, 1)
		if err := s.Register("StudySvc", "echo-reply", endpoint.ListenerFunc(func(context.Context, *endpoint.Delivery) { got <- struct{}{} })); err != nil {
			b.Fatal(err)
		}
		addr, err := endpoint.ParseAddress(to)
		if err != nil {
			b.Fatal(err)
		}
		m := message.New(message.Text("study", "text", "x"))
		ctx := context.Background()
		trip := func() time.Duration {
			t0 := time.Now()
			if err := s.Send(ctx, addr, m); err != nil {
				b.Fatal(err)
			}
			select {
			case <-got:
			case <-time.After(30 * time.Second):
				b.Fatal("no echo within 30 s")
			}
			return time.Since(t0)
		}
		testutil.BenchTrips(b, 50, trip) // 50 first: connection, route, JIT
	})
	b.Run("jxse-jxse", func(b *testing.B) {
		from := jxse.StartPeer(b, jxse.PeerOptions{})
		if _, err := from.Query("ping " + to + " 50"); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		res, err := from.Query(fmt.Sprintf("ping %s %d", to, b.N))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		p50, err := strconv.ParseFloat(res, 64)
		if err != nil {
			b.Fatalf("ping answered %q", res)
		}
		b.ReportMetric(p50, "p50-ns")
	})
}
