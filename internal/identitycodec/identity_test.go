package identitycodec_test

import (
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/codectest"
	"github.com/p2pmsg/p2pmsg/internal/identitycodec"
)

func TestConformance(t *testing.T) {
	c, err := identitycodec.New(), error(nil)
	if err != nil {
		t.Fatal(err)
	}
	codectest.Run(t, c)
}

func FuzzDecode(f *testing.F) {
	c, err := identitycodec.New(), error(nil)
	if err != nil {
		f.Fatal(err)
	}
	codectest.Fuzz(f, c)
}
