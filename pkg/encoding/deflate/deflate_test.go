package deflate_test

import (
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/codectest"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/deflate"
)

func TestConformance(t *testing.T) {
	c := deflate.New()
	codectest.Run(t, c)
}

func FuzzDecode(f *testing.F) {
	c := deflate.New()
	codectest.Fuzz(f, c)
}
