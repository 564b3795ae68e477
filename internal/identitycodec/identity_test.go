package identitycodec_test

import (
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/codectest"
	"github.com/p2pmsg/p2pmsg/internal/identitycodec"
)

func TestConformance(t *testing.T) {
	codectest.Run(t, identitycodec.New())
}

func FuzzDecode(f *testing.F) {
	codectest.Fuzz(f, identitycodec.New())
}
