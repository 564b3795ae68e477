package filekind_test

import (
	"io/fs"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/filekind"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		mode fs.FileMode
		want string
	}{
		{0o600, "a regular file"},
		{fs.ModeDir, "a directory"}, // no permission bits: String says d---------
		{fs.ModeDir | 0o755, "a directory"},
		{fs.ModeNamedPipe | 0o600, "a named pipe (FIFO)"},
		{fs.ModeDevice | fs.ModeCharDevice | 0o666, "a character device"},
		{fs.ModeDevice | 0o660, "a block device"},
		{fs.ModeSocket | 0o755, "a socket"},
		{fs.ModeSymlink | 0o777, "not a regular file"},
		{fs.ModeIrregular, "not a regular file"},
	} {
		if got := filekind.Of(tc.mode); got != tc.want {
			t.Errorf("Of(%v) = %q, want %q", tc.mode, got, tc.want)
		}
	}
}
