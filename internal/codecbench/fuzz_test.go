package codecbench_test

import (
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/codecbench"
	"github.com/p2pmsg/p2pmsg/internal/codectest"
)

// FuzzStdGzipDecode: the reference gzip codec's Decode is held to what
// every codec's is (codectest.Fuzz): no panic, never more than its limit,
// and whatever decodes round-trips.
func FuzzStdGzipDecode(f *testing.F) {
	c, err := codecbench.BenchCodec(codecbench.StdGzipName)
	if err != nil {
		f.Fatal(err)
	}
	codectest.Fuzz(f, c)
}
