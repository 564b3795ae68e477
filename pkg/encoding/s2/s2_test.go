package s2_test

import (
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/encoding/codectest"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/s2"
)

func TestConformance(t *testing.T) {
	c, err := s2.New()
	if err != nil {
		t.Fatal(err)
	}
	codectest.Run(t, c)
}

func FuzzDecode(f *testing.F) {
	c, err := s2.New()
	if err != nil {
		f.Fatal(err)
	}
	codectest.Fuzz(f, c)
}
