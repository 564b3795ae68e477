package jxtatcp

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"mime"
	"strings"
)

// The message package header JXSE writes before every message body:
// content-length (u64) then content-type, 63 bytes in all.
const (
	msgType         = "application/x-jxta-msg"
	frameHeaderSize = 1 + len("content-length") + 2 + 8 + 1 + len("content-type") + 2 + len(msgType) + 1
)

// appendFrameHeader appends the header of a frame whose body is n bytes.
func appendFrameHeader(dst []byte, n int) []byte {
	dst = append(dst, byte(len("content-length")))
	dst = append(dst, "content-length"...)
	dst = binary.BigEndian.AppendUint16(dst, 8)
	dst = binary.BigEndian.AppendUint64(dst, uint64(n))
	dst = append(dst, byte(len("content-type")))
	dst = append(dst, "content-type"...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(msgType)))
	dst = append(dst, msgType...)
	return append(dst, 0)
}

// Bounds on a frame header: JXSE writes two headers in 63 bytes, and
// ignores unknown ones; more than these is not a JXTA peer.
const (
	maxHeaders     = 32
	maxHeaderValue = 1024
	maxHeaderName  = 127 // JXSE reads the length as a signed byte
	lengthNotGiven = -1
)

// readFrameHeader reads a frame header and returns its body's length. It
// checks what JXSE checks: a content-length (the name in lower case, 8
// bytes) and a content-type naming the binary message format. A length
// over max is an ErrTooLarge error.
func readFrameHeader(br *bufio.Reader, max int64) (int64, error) {
	n := int64(lengthNotGiven)
	typed := false
	var buf [maxHeaderValue]byte
	for i := 0; ; i++ {
		nl, err := br.ReadByte()
		if err != nil {
			if i == 0 && err == io.EOF {
				return 0, io.EOF // a clean end between frames
			}
			return 0, fmt.Errorf("%w: header: %w", ErrFrame, unexpected(err))
		}
		if nl == 0 {
			break
		}
		if i == maxHeaders {
			return 0, fmt.Errorf("%w: more than %d headers", ErrFrame, maxHeaders)
		}
		if nl > maxHeaderName {
			return 0, fmt.Errorf("%w: header name of %d bytes", ErrFrame, nl)
		}
		name := buf[:nl]
		if _, err := io.ReadFull(br, name); err != nil {
			return 0, fmt.Errorf("%w: header: %w", ErrFrame, unexpected(err))
		}
		isLen, isType := string(name) == "content-length", string(name) == "content-type"
		var vl [2]byte
		if _, err := io.ReadFull(br, vl[:]); err != nil {
			return 0, fmt.Errorf("%w: header: %w", ErrFrame, unexpected(err))
		}
		l := int(binary.BigEndian.Uint16(vl[:]))
		if l > maxHeaderValue {
			return 0, fmt.Errorf("%w: header value of %d bytes", ErrFrame, l)
		}
		v := buf[:l]
		if _, err := io.ReadFull(br, v); err != nil {
			return 0, fmt.Errorf("%w: header: %w", ErrFrame, unexpected(err))
		}
		switch {
		case isLen:
			if l != 8 {
				return 0, fmt.Errorf("%w: content-length of %d bytes", ErrFrame, l)
			}
			u := binary.BigEndian.Uint64(v)
			if u > 1<<31-1 {
				return 0, fmt.Errorf("%w: content-length %d", ErrFrame, u)
			}
			n = int64(u)
		case isType:
			t, _, err := mime.ParseMediaType(string(v))
			if err != nil || !strings.EqualFold(t, msgType) {
				return 0, fmt.Errorf("%w: content-type %q", ErrFrame, v)
			}
			typed = true
		}
	}
	if n == lengthNotGiven {
		return 0, fmt.Errorf("%w: no content-length", ErrFrame)
	}
	if !typed {
		return 0, fmt.Errorf("%w: no content-type", ErrFrame)
	}
	if n > max {
		return 0, fmt.Errorf("%w: %d bytes (limit %d)", ErrTooLarge, n, max)
	}
	return n, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
