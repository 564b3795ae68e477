package identity_test

import (
	"testing"

	"github.com/p2pmsg/p2pmsg/pkg/encoding/codectest"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/identity"
)

func TestConformance(t *testing.T) {
	c, err := identity.New(), error(nil)
	if err != nil {
		t.Fatal(err)
	}
	codectest.Run(t, c)
}

func FuzzDecode(f *testing.F) {
	c, err := identity.New(), error(nil)
	if err != nil {
		f.Fatal(err)
	}
	codectest.Fuzz(f, c)
}
