// Package filekind words what a file that is not a regular one is, for
// the errors of code that refuses such a file where it wants one (a key
// file in pkg/node, the CLI's --key and --psk): fs.FileMode's String shows
// only the mode's bits, so a directory stripped of its permissions reads
// "d---------"; and it opens such a file only if it is a regular one
// (OpenRegular), checking the file opened, not the path. It sits below
// both and imports only the standard library.
package filekind

import "io/fs"

// Of says what a file of mode m is, worded to follow "is": "a directory",
// "a named pipe (FIFO)", "a character device", "a block device", "a
// socket", "a regular file", and "not a regular file" for any other type
// (a symbolic link not followed, an irregular file).
func Of(m fs.FileMode) string {
	switch t := m.Type(); {
	case t == 0:
		return "a regular file"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a block device"
	case t&fs.ModeSocket != 0:
		return "a socket"
	default:
		return "not a regular file"
	}
}
