package joinerr_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/joinerr"
)

func TestJoin(t *testing.T) {
	a, b := errors.New("a failed"), errors.New("b failed")
	for _, tc := range []struct {
		name string
		errs []error
		text string // "" for nil
	}{
		{"none", nil, ""},
		{"all nil", []error{nil, nil}, ""},
		{"one", []error{nil, a}, "a failed"},
		{"two", []error{a, nil, b}, "a failed; b failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := joinerr.Join(tc.errs...)
			if tc.text == "" {
				if err != nil {
					t.Fatalf("Join = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tc.text {
				t.Fatalf("Join = %v, want %q", err, tc.text)
			}
			for _, e := range tc.errs {
				if e != nil && !errors.Is(err, e) {
					t.Errorf("%v does not match %v", err, e)
				}
			}
		})
	}
	if err := joinerr.Join(a, &os.PathError{Op: "open", Path: "x", Err: io.EOF}); !errors.Is(err, io.EOF) {
		t.Errorf("a wrapped error's chain is not followed: %v", err)
	}
}

func ExampleJoin() {
	err := joinerr.Join(errors.New("flushing to peer A: stream reset"), nil, errors.New("refused by peer A: no key"))
	fmt.Println(err)
	// Output: flushing to peer A: stream reset; refused by peer A: no key
}

func TestSplit(t *testing.T) {
	a, b, c := errors.New("a failed"), errors.New("b failed"), errors.New("c failed")
	wrapped := fmt.Errorf("doing x: %w (%w)", a, b)
	for _, tc := range []struct {
		name string
		err  error
		want []error
	}{
		{"one", a, []error{a}},
		{"joined", joinerr.Join(a, b), []error{a, b}},
		{"nested", joinerr.Join(joinerr.Join(a, b), c), []error{a, b, c}},
		{"wrapped, not split", joinerr.Join(wrapped, c), []error{wrapped, c}},
		{"errors.Join, not split", errors.Join(a, b), []error{errors.Join(a, b)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := joinerr.Split(tc.err)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("Split = %q, want %q", got, tc.want)
			}
		})
	}
}
