package pipe_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/jxse"
	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

var benchRuns atomic.Int64

// BenchmarkJXSEPipeRoundTrip measures the round trip of a 1-byte message
// through unicast pipes with a live JXSE 2.7 peer that echoes each
// message on a second pipe, signed as JXSE signs by default: from p2pmsg
// (p2pmsg-jxse) and, as the reference, from a second JXSE peer
// (jxse-jxse). p50-ns is the median round trip.
func BenchmarkJXSEPipeRoundTrip(b *testing.B) {
	echo := jxse.StartPeer(b, jxse.PeerOptions{})
	b.Run("p2pmsg-jxse", func(b *testing.B) {
		s, ident := jxtaPipes(b)
		ctx := context.Background()
		k := benchRuns.Add(1) // the benchmark function runs more than once
		there, back := seededAdv(b, fmt.Sprint("bench-there-", k)), seededAdv(b, fmt.Sprint("bench-back-", k))
		in, err := s.NewInputPipe(back)
		if err != nil {
			b.Fatal(err)
		}
		defer in.Close()
		// Connect first, so that JXSE can route its answers here.
		hello, _ := endpoint.ParseAddress(echo.Addr() + "/StudySvc/ep")
		if err := s.Endpoint().Send(ctx, hello, message.New(message.Text("study", "text", "hello"))); err != nil {
			b.Fatal(err)
		}
		if err := echo.Command("pipeecho " + there.ID.String() + " " + back.ID.String() + " " + ident.ID().String()); err != nil {
			b.Fatal(err)
		}
		out, err := s.NewOutputPipe(ctx, there, pipe.ToJXTAPeers(echo.Addr()))
		if err != nil {
			b.Fatal(err)
		}
		defer out.Close()
		m := message.New(message.Text("study", "text", "x"))
		trip := func() time.Duration {
			t0 := time.Now()
			if err := out.Send(ctx, m); err != nil {
				b.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			r, err := in.ReceiveFrom(rctx)
			if err != nil {
				b.Fatal(err)
			}
			d := time.Since(t0)
			r.Release()
			return d
		}
		testutil.BenchTrips(b, 50, trip) // 50 first: connection, route, JIT
	})
	b.Run("jxse-jxse", func(b *testing.B) {
		from := jxse.StartPeer(b, jxse.PeerOptions{})
		for _, r := range [][2]*jxse.Peer{{from, echo}, {echo, from}} {
			if err := r[0].Command("route " + r[1].ID + " " + r[1].Addr()); err != nil {
				b.Fatal(err)
			}
		}
		k := benchRuns.Add(1)
		there, back := seededAdv(b, fmt.Sprint("bench-jxse-there-", k)), seededAdv(b, fmt.Sprint("bench-jxse-back-", k))
		if err := echo.Command("pipeecho " + there.ID.String() + " " + back.ID.String() + " " + from.ID); err != nil {
			b.Fatal(err)
		}
		ping := func(n int) string {
			res, err := from.Query(fmt.Sprintf("pipeping %s %s %s %d", there.ID, back.ID, echo.ID, n))
			if err != nil {
				b.Fatal(err)
			}
			return res
		}
		ping(50)
		b.ResetTimer()
		res := ping(b.N)
		b.StopTimer()
		p50, err := strconv.ParseFloat(strings.TrimSpace(res), 64)
		if err != nil {
			b.Fatalf("pipeping answered %q", res)
		}
		b.ReportMetric(p50, "p50-ns")
	})
}

// BenchmarkJXSEBiDiRoundTrip measures the round trip of a 1-byte message
// through a reliable JxtaBiDiPipe to a live JXSE 2.7 peer's JxtaServerPipe,
// which echoes it, signed: from p2pmsg (p2pmsg-jxse) and, as the
// reference, from a second JXSE peer (jxse-jxse). p50-ns is the median.
func BenchmarkJXSEBiDiRoundTrip(b *testing.B) {
	echo := jxse.StartPeer(b, jxse.PeerOptions{})
	b.Run("p2pmsg-jxse", func(b *testing.B) {
		s, _ := jxtaPipes(b)
		ctx := context.Background()
		a := seededAdv(b, fmt.Sprint("bench-bidi-", benchRuns.Add(1)))
		if err := echo.Command("bidilisten " + a.ID.String()); err != nil {
			b.Fatal(err)
		}
		bidi, err := s.Connect(ctx, a, pipe.ToJXTAPeers(echo.Addr()))
		if err != nil {
			b.Fatal(err)
		}
		defer bidi.Close()
		m := message.New(message.Text("study", "text", "x"))
		trip := func() time.Duration {
			t0 := time.Now()
			if err := bidi.Send(ctx, m); err != nil {
				b.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			if _, err := bidi.Receive(rctx); err != nil {
				b.Fatal(err)
			}
			return time.Since(t0)
		}
		testutil.BenchTrips(b, 50, trip)
	})
	b.Run("jxse-jxse", func(b *testing.B) {
		from := jxse.StartPeer(b, jxse.PeerOptions{})
		for _, r := range [][2]*jxse.Peer{{from, echo}, {echo, from}} {
			if err := r[0].Command("route " + r[1].ID + " " + r[1].Addr()); err != nil {
				b.Fatal(err)
			}
		}
		a := seededAdv(b, fmt.Sprint("bench-jxse-bidi-", benchRuns.Add(1)))
		if err := echo.Command("bidilisten " + a.ID.String()); err != nil {
			b.Fatal(err)
		}
		res, err := from.Query(fmt.Sprintf("bidiping %s %s %d", a.ID, echo.ID, max(b.N, 20)))
		if err != nil {
			b.Fatal(err)
		}
		p50, err := strconv.ParseFloat(strings.TrimSpace(res), 64)
		if err != nil {
			b.Fatalf("bidiping answered %q", res)
		}
		b.ReportMetric(p50, "p50-ns")
	})
}
