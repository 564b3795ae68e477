package jxtatcp

import (
	"errors"
	"testing"
)

func TestWithUnsentLimitBounds(t *testing.T) {
	for _, tc := range []struct {
		n       int
		wantErr error
	}{
		{0, nil}, {16 << 10, nil}, {DefaultUnsentLimit, nil}, {64 << 20, nil},
		{-1, ErrBadOption}, {1, ErrBadOption}, {16<<10 - 1, ErrBadOption}, {64<<20 + 1, ErrBadOption},
	} {
		tr, err := New(testIdent, func(*Incoming) {}, WithUnsentLimit(tc.n))
		if !errors.Is(err, tc.wantErr) {
			t.Errorf("WithUnsentLimit(%d): %v, want %v", tc.n, err, tc.wantErr)
		}
		if err == nil {
			tr.Close()
		}
	}
}
