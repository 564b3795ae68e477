package xmlc_test

import (
	"fmt"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/xmlc"
)

// A codec's first encode of a document allocates for the document's main
// stream, not for the level's 8 MiB zstd window: what is left is the
// level's match tables (34 MB at the best level) and history sized to
// what a message is.
func TestFirstEncodeAllocatesForTheDocument(t *testing.T) {
	in := datasets.DataSet(40) // 16 KiB
	for _, tc := range []struct {
		level int
		max   uint64 // bytes
	}{
		{3, 8 << 20},  // before, 21 MB
		{4, 40 << 20}, // before, 53 MB
	} {
		t.Run(fmt.Sprintf("xml:%d", tc.level), func(t *testing.T) {
			c, err := xmlc.New(xmlc.WithLevel(tc.level))
			if err != nil {
				t.Fatal(err)
			}
			got := testutil.Allocated(func() { _, err = c.Encode(nil, in, encoding.Binding{}) })
			if err != nil {
				t.Fatal(err)
			}
			if got > tc.max {
				t.Errorf("first encode of %d bytes allocated %d bytes, want at most %d", len(in), got, tc.max)
			}
		})
	}
}
