package gzip_test

import (
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/codectest"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/gzip"
)

func TestConformance(t *testing.T) {
	c := gzip.New()
	codectest.Run(t, c)
}

func FuzzDecode(f *testing.F) {
	c := gzip.New()
	codectest.Fuzz(f, c)
}
