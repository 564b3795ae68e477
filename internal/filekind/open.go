package filekind

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// NotRegularError is OpenRegular's refusal of a file that is not a
// regular one; Mode is the opened file's mode.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s", e.Path, Of(e.Mode))
}

// OpenRegular opens path for reading and returns it with its FileInfo if
// it is a regular file; anything else is closed and refused with a
// *NotRegularError. The type is checked on the opened file, not on the
// path before opening it, so a path swapped between the two cannot slip
// a FIFO or a device in; and the open does not wait (O_NONBLOCK), as
// opening a FIFO with no writer otherwise would, until a writer came.
// O_NONBLOCK changes nothing for a regular file's reads. Errors of the
// open itself are os.OpenFile's (errors.Is(err, fs.ErrNotExist) holds
// for a missing file).
func OpenRegular(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, &NotRegularError{Path: path, Mode: st.Mode()}
	}
	return f, st, nil
}
