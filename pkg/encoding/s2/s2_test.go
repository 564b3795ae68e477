package s2_test

import (
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/codectest"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/s2"
)

func TestConformance(t *testing.T) {
	c := s2.New()
	codectest.Run(t, c)
}

func FuzzDecode(f *testing.F) {
	c := s2.New()
	codectest.Fuzz(f, c)
}
