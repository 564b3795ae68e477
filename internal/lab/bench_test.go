package lab_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/lab"
)

// BenchmarkRoundTrip measures one message/echo pair per iteration for each
// layer side by side: raw TCP, a raw libp2p stream between p2pmsg node
// hosts, the endpoint service, unicast pipes and sockets. Bytes count both
// directions.
func BenchmarkRoundTrip(b *testing.B) {
	layers := []lab.Layer{lab.TCPLayer{}, lab.StreamLayer{NewHost: lab.NodeHost}, lab.EndpointLayer{}, lab.PipeLayer{}, lab.SocketLayer{}}
	for _, l := range layers {
		for _, size := range []int{1, 1 << 10, 64 << 10, 1 << 20, 16 << 20} {
			b.Run(fmt.Sprintf("layer=%s/size=%s", l.Name(), lab.FormatSize(size)), func(b *testing.B) {
				ctx := context.Background()
				p, err := l.Open(ctx, lab.TransportTCP)
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				payload := make([]byte, size)
				b.SetBytes(2 * int64(size))
				b.ReportAllocs()
				for b.Loop() {
					if err := p.RoundTrip(ctx, payload); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
