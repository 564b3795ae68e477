package socket_test

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/jxse"
	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

var benchRuns atomic.Int64

// BenchmarkJXSESocketRoundTrip measures the round trip of one byte
// through a JxtaSocket to a live JXSE 2.7 peer that echoes it, signed as
// JXSE signs by default: from p2pmsg (p2pmsg-jxse) and, as the reference,
// from a second JXSE peer (jxse-jxse). p50-ns is the median round trip.
func BenchmarkJXSESocketRoundTrip(b *testing.B) {
	echo := jxse.StartPeer(b, jxse.PeerOptions{})
	b.Run("p2pmsg-jxse", func(b *testing.B) {
		s, _, _ := jxtaSockets(b)
		ctx := context.Background()
		a := seeded(b, fmt.Sprint("bench-echo-", benchRuns.Add(1)))
		if err := echo.Command("socklisten " + a.ID.String() + " echo"); err != nil {
			b.Fatal(err)
		}
		c, err := s.Dial(ctx, a, pipe.ToJXTAPeers(echo.Addr()))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		one := []byte{1}
		trip := func() time.Duration {
			t0 := time.Now()
			if _, err := c.Write(one); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c, one); err != nil {
				b.Fatal(err)
			}
			return time.Since(t0)
		}
		testutil.BenchTrips(b, 50, trip) // 50 first: route, JIT
	})
	b.Run("jxse-jxse", func(b *testing.B) {
		from := jxse.StartPeer(b, jxse.PeerOptions{})
		routes(b, from, echo)
		a := seeded(b, fmt.Sprint("bench-jxse-echo-", benchRuns.Add(1)))
		if err := echo.Command("socklisten " + a.ID.String() + " echo"); err != nil {
			b.Fatal(err)
		}
		ping := func(n int) string {
			res, err := from.Query(fmt.Sprintf("sockping %s %s %d", a.ID, echo.ID, n))
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
			b.Fatalf("sockping answered %q", res)
		}
		b.ReportMetric(p50, "p50-ns")
	})
}

func routes(b testing.TB, x, y *jxse.Peer) {
	for _, r := range [][2]*jxse.Peer{{x, y}, {y, x}} {
		if err := r[0].Command("route " + r[1].ID + " " + r[1].Addr()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJXSESocketWrite measures a JxtaSocket's throughput to a live
// JXSE 2.7 peer that reads and discards, signed: each op writes 1 MiB in
// 64 KiB writes, after 16 MiB to warm JXSE's JIT up; the time includes
// the close, which waits until JXSE has acknowledged every block. The
// jxse-jxse reference writes as many bytes from a second JXSE peer.
func BenchmarkJXSESocketWrite(b *testing.B) {
	const mib = 1 << 20
	sink := jxse.StartPeer(b, jxse.PeerOptions{})
	b.Run("p2pmsg-jxse", func(b *testing.B) {
		s, _, _ := jxtaSockets(b)
		ctx := context.Background()
		a := seeded(b, fmt.Sprint("bench-sink-", benchRuns.Add(1)))
		if err := sink.Command("socklisten " + a.ID.String() + " sink"); err != nil {
			b.Fatal(err)
		}
		buf := jxse.Pattern(64 << 10)
		write := func(n int) {
			c, err := s.Dial(ctx, a, pipe.ToJXTAPeers(sink.Addr()))
			if err != nil {
				b.Fatal(err)
			}
			for range n * mib / len(buf) {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			if err := c.Close(); err != nil {
				b.Fatal(err)
			}
		}
		write(16)
		b.SetBytes(mib)
		b.ReportAllocs()
		b.ResetTimer()
		write(b.N)
	})
	b.Run("jxse-jxse", func(b *testing.B) {
		from := jxse.StartPeer(b, jxse.PeerOptions{})
		routes(b, from, sink)
		a := seeded(b, fmt.Sprint("bench-jxse-sink-", benchRuns.Add(1)))
		if err := sink.Command("socklisten " + a.ID.String() + " sink"); err != nil {
			b.Fatal(err)
		}
		send := func(n int) float64 {
			res, err := from.Query(fmt.Sprintf("socksendrate %s %s %d", a.ID, sink.ID, n*mib))
			if err != nil {
				b.Fatal(err)
			}
			ns, err := strconv.ParseFloat(strings.TrimSpace(res), 64)
			if err != nil {
				b.Fatalf("socksendrate answered %q", res)
			}
			return ns
		}
		send(16)
		b.SetBytes(mib)
		b.ResetTimer()
		ns := send(b.N)
		b.StopTimer()
		// The op time is JXSE's own measurement, not the command's.
		b.ReportMetric(ns/float64(b.N), "jxse-ns/op")
		b.ReportMetric(float64(b.N*mib)/ns*1e3, "jxse-MB/s")
	})
}
