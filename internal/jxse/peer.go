package jxse

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The jars a live JXSE 2.7 peer needs beside JXSE's (its TCP transport
// runs on Netty, its PSE on Bouncy Castle).
var runtimeDeps = [][3]string{
	{"org.jboss.netty", "netty", "3.2.2.Final"},
	{"bouncycastle", "bcprov-jdk15", "140"},
}

var (
	depsOnce sync.Once
	depsPath []string
	depsErr  error
)

// peerClassPath is the class path of a live peer: the helpers first, so
// that the CompatibilityUtils stand-in (testdata) wins over JXSE's own,
// which cannot start on Java 9 and later.
func peerClassPath() (string, error) {
	if err := Available(); err != nil {
		return "", err
	}
	depsOnce.Do(func() {
		for _, d := range runtimeDeps {
			jar, err := locateArtifact(d[0], d[1], d[2])
			if err != nil {
				depsErr = err
				return
			}
			depsPath = append(depsPath, jar)
		}
	})
	if depsErr != nil {
		return "", depsErr
	}
	return strings.Join(append([]string{classDir, jarPath}, depsPath...), string(os.PathListSeparator)), nil
}

// PeerOptions configure a live JXSE peer.
type PeerOptions struct {
	// Unsigned starts the JVM with CBJX disabled: the peer neither signs
	// nor requires signed messages.
	Unsigned bool
}

// Peer is a live, unmodified JXSE 2.7 peer (testdata/JxsePeer.java) in
// a child process, listening on a TCP port of 127.0.0.1.
type Peer struct {
	// ID is its peer ID (urn:jxta:cbid-…); Port its TCP port.
	ID   string
	Port int

	cmd      *exec.Cmd
	stdin    io.WriteCloser
	mu       sync.Mutex // one command at a time
	recv     chan Received
	replies  chan string
	done     chan struct{}
	stderr   *tail
	stopOnce sync.Once
}

// Received is a message the peer's StudySvc/ep listener got (Kind
// "RECV"), or one of its input pipes (Kind "PIPE", Service "PipeService",
// Param the pipe ID, no Source), or an event of its bidilisten and
// socklisten listeners (see JxsePeer.java), with Param the pipe ID:
//
//	Kind         Source          Text
//	BIDI-OPEN    remote peer ID
//	BIDI                         the message's text
//	BIDI-CLOSED
//	SOCK                         "<bytes> <sha256 hex>"
//	SOCK-SENT                    "<bytes>"
type Received struct {
	Service, Param, Source, Text string
	Kind                         string
}

// Addr is the peer's TCP address, tcp://127.0.0.1:port.
func (p *Peer) Addr() string { return "tcp://127.0.0.1:" + strconv.Itoa(p.Port) }

// StartPeer starts a JXSE peer and waits until it is ready; it stops when
// t ends. Without Java, Maven or the jars it skips t (fails it under CI).
func StartPeer(t TB, o PeerOptions) *Peer {
	t.Helper()
	Require(t)
	cp, err := peerClassPath()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("JXSE peer unavailable under CI: %v", err)
		}
		t.Skipf("JXSE peer unavailable: %v", err)
	}
	for attempt := 0; ; attempt++ {
		p, err := startPeer(cp, o, t.TempDir())
		if err == nil {
			t.Cleanup(func() { p.Close() })
			return p
		}
		if attempt == 2 {
			t.Fatalf("starting a JXSE peer: %v", err)
		}
		t.Logf("starting a JXSE peer: %v (again)", err)
		// A JVM that died at once under a loaded machine's pressure
		// (CI: three in 0.2 s, nothing on stderr) is given a moment.
		time.Sleep(time.Duration(attempt+1) * time.Second)
	}
}

// Launch starts a JXSE peer with its home directory in home, for tools;
// Close stops it.
func Launch(o PeerOptions, home string) (*Peer, error) {
	cp, err := peerClassPath()
	if err != nil {
		return nil, err
	}
	return startPeer(cp, o, home)
}

// Close stops the peer.
func (p *Peer) Close() error {
	p.stopOnce.Do(p.stop)
	return nil
}

func startPeer(cp string, o PeerOptions, home string) (*Peer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"-Xss16m", "-cp", cp}
	if o.Unsigned {
		args = append(args, "-Dnet.jxta.endpoint.WireFormatMessageFactory.CBJX_DISABLE=true")
	}
	args = append(args, "JxsePeer", "p2pmsg-test", strconv.Itoa(port), home)
	cmd := exec.Command("java", args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &Peer{Port: port, cmd: cmd, stdin: stdin, recv: make(chan Received, 1024), replies: make(chan string, 1),
		done: make(chan struct{}), stderr: &tail{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan string, 1)
	go p.readLines(stdout, ready)
	select {
	case id := <-ready:
		p.ID = id
	case <-p.done:
		werr := cmd.Wait() // how it ended: an exit status or a signal
		return nil, fmt.Errorf("JXSE peer exited before it was ready (%v): %s", werr, p.stderr)
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("JXSE peer not ready after 2 minutes: %s", p.stderr)
	}
	return p, nil
}

func (p *Peer) readLines(r io.Reader, ready chan<- string) {
	defer close(p.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		verb, rest, _ := strings.Cut(line, " ")
		switch verb {
		case "READY":
			id, _, _ := strings.Cut(rest, " ")
			ready <- id
		case "RECV":
			f := strings.SplitN(rest, " ", 4)
			for len(f) < 4 {
				f = append(f, "")
			}
			p.received(Received{Kind: verb, Service: f[0], Param: f[1], Source: f[2], Text: f[3]})
		case "PIPE":
			pid, text, _ := strings.Cut(rest, " ")
			p.received(Received{Kind: verb, Service: "PipeService", Param: pid, Text: text})
		case "BIDI-OPEN":
			pid, peer, _ := strings.Cut(rest, " ")
			p.received(Received{Kind: verb, Param: pid, Source: peer})
		case "BIDI", "BIDI-CLOSED", "SOCK", "SOCK-SENT":
			pid, text, _ := strings.Cut(rest, " ")
			p.received(Received{Kind: verb, Param: pid, Text: text})
		case "OK", "ERR":
			p.replies <- line
		}
	}
}

func (p *Peer) received(r Received) {
	select {
	case p.recv <- r:
	default: // nobody reads them; the test will see what it missed
	}
}

// Pattern returns the n bytes JxsePeer's socket commands send (byte i is
// i*7 + i/65536, truncated to 8 bits), to check what a peer received.
func Pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/65536)
	}
	return b
}

// Send makes the peer send a message with study:text = text to addr, a
// JXTA endpoint address (tcp://host:port/service/param or
// jxta://cbid-…/service/param).
func (p *Peer) Send(addr, text string) error {
	return p.Command("send " + addr + " " + text)
}

// Command sends the peer a command line (see JxsePeer.java) and waits
// for its answer.
func (p *Peer) Command(line string) error {
	_, err := p.Query(line)
	return err
}

// Query is Command for commands that answer "OK <result>": it returns
// the result.
func (p *Peer) Query(line string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := fmt.Fprintln(p.stdin, line); err != nil {
		return "", err
	}
	select {
	case r := <-p.replies:
		if rest, ok := strings.CutPrefix(r, "OK"); ok {
			return strings.TrimSpace(rest), nil
		}
		return "", errors.New(r)
	case <-p.done:
		return "", fmt.Errorf("JXSE peer exited: %s", p.stderr)
	case <-time.After(5 * time.Minute):
		return "", errors.New("JXSE peer did not answer within 5 minutes")
	}
}

// Log returns the last lines the peer logged.
func (p *Peer) Log() string { return p.stderr.String() }

// Next returns the next message or listener event the peer reported,
// waiting until ctx ends.
func (p *Peer) Next(ctx context.Context) (Received, error) {
	select {
	case r := <-p.recv:
		return r, nil
	case <-ctx.Done():
		return Received{}, fmt.Errorf("no message at the JXSE peer: %w (its log: %s)", ctx.Err(), p.stderr)
	}
}

func (p *Peer) stop() {
	p.stdin.Write([]byte("quit\n"))
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
	}
	p.cmd.Wait()
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// tail keeps the last lines a process wrote, for error messages.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > 16<<10 {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-8<<10:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return lastLines(string(t.buf), 15)
}

// QueryAsync is Query in the background, for commands that wait on the
// caller (a JXSE client connecting to it): the channel gets the result,
// or "ERR " and the error.
func (p *Peer) QueryAsync(line string) <-chan string {
	c := make(chan string, 1)
	go func() {
		res, err := p.Query(line)
		if err != nil {
			res = "ERR " + err.Error()
		}
		c <- res
	}()
	return c
}
