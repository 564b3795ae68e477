package jxtatcp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Errors.
var (
	// ErrWelcome: a peer's welcome line is malformed, too long or late.
	ErrWelcome = errors.New("jxtatcp: bad welcome")
	// ErrFrame: a frame's header is malformed; the connection is closed.
	ErrFrame = errors.New("jxtatcp: bad frame")
	// ErrTooLarge: a message over the maximum size, sent or received.
	ErrTooLarge = errors.New("jxtatcp: message too large")
	// ErrSignature: a CBJX trailer is malformed or does not verify.
	ErrSignature = errors.New("jxtatcp: bad signature")
	// ErrNoRoute: no connection to a jxta:// peer, and no address for it.
	ErrNoRoute = errors.New("jxtatcp: no route to peer")
	// ErrAddress: an address this transport cannot use.
	ErrAddress = errors.New("jxtatcp: bad address")
	// ErrClosed: the transport or the connection is closed.
	ErrClosed = errors.New("jxtatcp: closed")
	// ErrTooManyConns: a dial found every connection slot taken and none
	// idle long enough to close for it (WithMaxConns).
	ErrTooManyConns = errors.New("jxtatcp: too many connections")
	// ErrBadOption: New was given an invalid option (or none of an
	// identity and a handler).
	ErrBadOption = errors.New("jxtatcp: invalid option")
)

// Welcome is the line each end of a connection sends first:
// JXTAHELLO <destination> <public-address> <peer-ID> <no-propagate> <version>.
type Welcome struct {
	// Dest is the address the sender dialled (client) or the address it
	// sees the other end at (server).
	Dest string
	// Public is the sender's own public address.
	Public string
	// Peer is the sender's peer ID, as a URN. Nothing authenticates it.
	Peer        string
	NoPropagate bool
	// Version is "1.1" as JXSE 2.7 sends it; "3.0" carries Preferred.
	Version   string
	Preferred int
}

// maxWelcome is the longest welcome line JXSE reads, CR LF included.
const maxWelcome = 4096

// welcomeVersion is the version JXSE 2.7 sends and this transport speaks.
const welcomeVersion = "1.1"

// Append appends the welcome line, CR LF included.
func (w *Welcome) Append(dst []byte) []byte {
	flag := "0"
	if w.NoPropagate {
		flag = "1"
	}
	dst = append(dst, "JXTAHELLO "...)
	dst = append(dst, w.Dest...)
	dst = append(dst, ' ')
	dst = append(dst, w.Public...)
	dst = append(dst, ' ')
	dst = append(dst, w.Peer...)
	dst = append(dst, ' ')
	dst = append(dst, flag...)
	if w.Version == "3.0" {
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, int64(w.Preferred), 10)
	}
	dst = append(dst, ' ')
	dst = append(dst, w.Version...)
	return append(dst, '\r', '\n')
}

// ParseWelcome parses a welcome line (without its CR LF) as JXSE 2.7
// does: at least five whitespace-separated fields, JXTAHELLO, two
// endpoint addresses and a URI; version 1.1 with exactly six fields and
// a flag of 0 or 1; 3.0 with seven, the sixth an integer; other versions
// as they are.
func ParseWelcome(line string) (Welcome, error) {
	bad := func(why string) (Welcome, error) {
		return Welcome{}, fmt.Errorf("%w: %s", ErrWelcome, why)
	}
	f := strings.Fields(line)
	if len(f) < 5 {
		return bad(fmt.Sprintf("%d fields, want at least 5", len(f)))
	}
	if f[0] != "JXTAHELLO" {
		return bad("does not start with JXTAHELLO")
	}
	if !isEndpointAddress(f[1]) || !isEndpointAddress(f[2]) {
		return bad("destination or public address is not an endpoint address")
	}
	if u, err := url.Parse(f[3]); err != nil || u.Scheme == "" {
		return bad("peer ID is not a URI")
	}
	w := Welcome{Dest: f[1], Public: f[2], Peer: f[3], Version: f[len(f)-1]}
	flag := func(s string) (bool, error) {
		switch s {
		case "0":
			return false, nil
		case "1":
			return true, nil
		}
		return false, fmt.Errorf("%w: no-propagate flag %q", ErrWelcome, s)
	}
	var err error
	switch w.Version {
	case "1.1":
		if len(f) != 6 {
			return bad("version 1.1 wants 6 fields")
		}
		if w.NoPropagate, err = flag(f[4]); err != nil {
			return Welcome{}, err
		}
	case "3.0":
		if len(f) != 7 {
			return bad("version 3.0 wants 7 fields")
		}
		if w.NoPropagate, err = flag(f[4]); err != nil {
			return Welcome{}, err
		}
		if w.Preferred, err = strconv.Atoi(f[5]); err != nil {
			return bad("preferred message version is not an integer")
		}
	}
	return w, nil
}

// isEndpointAddress reports whether s is protocol://address[/…].
func isEndpointAddress(s string) bool {
	proto, rest, ok := strings.Cut(s, "://")
	if !ok || proto == "" || rest == "" || rest[0] == '/' {
		return false
	}
	for _, c := range proto {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// readWelcome reads a welcome line: up to its CR LF, at most maxWelcome
// bytes.
func readWelcome(br *bufio.Reader) (Welcome, error) {
	var line []byte
	for {
		b, err := br.ReadSlice('\n')
		line = append(line, b...)
		if len(line) > maxWelcome {
			return Welcome{}, fmt.Errorf("%w: no CR LF in %d bytes", ErrWelcome, maxWelcome)
		}
		if err == nil && bytes.HasSuffix(line, []byte("\r\n")) {
			break
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return Welcome{}, fmt.Errorf("%w: %w", ErrWelcome, err)
		}
	}
	return ParseWelcome(string(line[:len(line)-2]))
}
