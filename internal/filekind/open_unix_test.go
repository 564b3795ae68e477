//go:build unix

package filekind_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/filekind"
)

// TestOpenRegularFIFO opens a FIFO nobody writes to: OpenRegular must
// refuse it, naming what it is, rather than wait for a writer, as a plain
// open does (the callers' check of the path before opening it left the
// path free to be swapped for a FIFO in between).
func TestOpenRegularFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "key")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		f, _, err := filekind.OpenRegular(fifo)
		if f != nil {
			f.Close()
		}
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		// Not a measure of speed: the open waits for a writer, so give it
		// one, or the test would hang.
		if w, werr := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); werr == nil {
			w.Close()
		}
		<-done
		t.Fatalf("opening FIFO %s waited for a writer", fifo)
	}
	var nr *filekind.NotRegularError
	if !errors.As(err, &nr) || nr.Mode.Type() != fs.ModeNamedPipe || !strings.Contains(err.Error(), "a named pipe (FIFO)") {
		t.Fatalf("OpenRegular(FIFO) = %v, want a NotRegularError naming a named pipe (FIFO)", err)
	}
}

func TestOpenRegular(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, st, err := filekind.OpenRegular(file)
	if err != nil {
		t.Fatalf("OpenRegular(regular file) = %v", err)
	}
	b := make([]byte, 8)
	n, _ := f.Read(b)
	f.Close()
	if string(b[:n]) != "key" || st.Size() != 3 {
		t.Fatalf("read %q (size %d), want \"key\" (3)", b[:n], st.Size())
	}
	for _, tc := range []struct {
		path    string
		wantErr error
		want    string
	}{
		{dir, nil, "a directory"},
		{"/dev/null", nil, "a character device"},
		{filepath.Join(dir, "missing"), fs.ErrNotExist, ""},
	} {
		f, _, err := filekind.OpenRegular(tc.path)
		if f != nil {
			f.Close()
		}
		switch {
		case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
			t.Errorf("OpenRegular(%s) = %v, want %v", tc.path, err, tc.wantErr)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("OpenRegular(%s) = %v, want it named %s", tc.path, err, tc.want)
		}
	}
}
