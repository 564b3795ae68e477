package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
)

// daemon is a p2pmsg process running in the background, such as recv.
type daemon struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	addrs  []string // what it announced with "listening <multiaddr>"
	lines  chan string
	stderr []string
	done   chan struct{}
}

// start runs p2pmsg with args and waits for its "listening" lines, which
// it prints together before anything else.
func start(t *testing.T, stdin io.Reader, args ...string) *daemon {
	t.Helper()
	return startTo(t, stdin, nil, args...)
}

// startTo is start with the daemon's stdout going to out (nil: a buffer,
// d.stdout).
func startTo(t *testing.T, stdin io.Reader, out io.Writer, args ...string) *daemon {
	t.Helper()
	cmd := exec.Command(binary_, args...)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
	cmd.Stdin = stdin
	return startCmd(t, cmd, out, fmt.Sprintf("p2pmsg %v", args))
}

// startCmd starts cmd, a p2pmsg process or a script running one, with its
// stdout going to out (nil: a buffer, d.stdout), and waits until it has
// announced its addresses ("listening …" lines on stderr); what names it
// in failures.
func startCmd(t *testing.T, cmd *exec.Cmd, out io.Writer, what string) *daemon {
	t.Helper()
	d := &daemon{cmd: cmd, lines: make(chan string, 64), done: make(chan struct{})}
	d.cmd.Stdout = &d.stdout
	if out != nil {
		d.cmd.Stdout = out
	}
	errPipe, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			d.lines <- sc.Text()
		}
		close(d.lines)
		d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			d.cmd.Process.Kill()
			<-d.done
		}
	})
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-d.lines:
			if !ok {
				t.Fatalf("%s exited without listening: %q", what, d.stderr)
			}
			d.stderr = append(d.stderr, l)
			if a, ok := strings.CutPrefix(l, "listening "); ok {
				d.addrs = append(d.addrs, a)
				continue
			}
		case <-time.After(200 * time.Millisecond):
			if len(d.addrs) > 0 {
				return d
			}
			continue
		case <-timeout:
			t.Fatalf("%s announced nothing; stderr %q", what, d.stderr)
		}
	}
}

// jxtaAddr returns the JXTA TCP address and peer ID the daemon announced
// ("listening jxta ADDR ID"), or "".
func (d *daemon) jxtaAddr() (addr, id string) {
	for _, a := range d.addrs {
		if rest, ok := strings.CutPrefix(a, "jxta "); ok {
			addr, id, _ = strings.Cut(rest, " ")
		}
	}
	return addr, id
}

// p2pAddr returns the first libp2p multiaddr the daemon announced, or "".
func (d *daemon) p2pAddr() string {
	for _, a := range d.addrs {
		if !strings.HasPrefix(a, "jxta ") {
			return a
		}
	}
	return ""
}

// wait waits for the daemon to exit and returns its exit code; its
// stderr is then complete in d.stderr. It reads stderr while it waits: a
// daemon that writes more lines than d.lines holds is reaped only once
// they are read.
func (d *daemon) wait(t *testing.T) int {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	killed := false
	for lines := d.lines; lines != nil; {
		select {
		case l, ok := <-lines:
			if !ok {
				lines = nil
				break
			}
			d.stderr = append(d.stderr, l)
		case <-timeout:
			d.cmd.Process.Kill()
			killed = true
		}
	}
	<-d.done
	if killed {
		t.Fatalf("p2pmsg did not exit; stderr %q", d.stderr)
	}
	return d.cmd.ProcessState.ExitCode()
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func newPipeAdv(t *testing.T, typ string) string {
	t.Helper()
	r := run(t, nil, "adv", "new", "--type", typ, "--name", "t")
	if r.code != 0 {
		t.Fatalf("adv new: %s", r.stderr)
	}
	return writeFile(t, "pipe.xml", r.stdout)
}

// loopback is the listen address of the tests' daemons (testutil.Loopback:
// TCP unless the tests run on QUIC).
var loopback = testutil.Loopback()

func TestSendRecvJSON(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--json", "--count", "3")
	if !strings.Contains(recv.addrs[0], "/p2p/12D3") {
		t.Fatalf("announced %q, want a full multiaddr", recv.addrs[0])
	}
	doc := writeFile(t, "doc.bin", []byte{0, 1, 2, 255})
	r := run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "text=héllo", "--elem", "blob=@"+doc, "--ns", "app", "--count", "3")
	if r.code != 0 {
		t.Fatalf("send: exit %d: %s", r.code, r.stderr)
	}
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv exit %d: %s", code, recv.stderr)
	}
	lines := strings.Split(strings.TrimSpace(recv.stdout.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("recv printed %d lines: %q", len(lines), recv.stdout.String())
	}
	want := `{"elements":[{"namespace":"app","name":"text","mime":"text/plain;charset=UTF-8","data":"` +
		base64.StdEncoding.EncodeToString([]byte("héllo")) + `"},{"namespace":"app","name":"blob","mime":"application/octet-stream","data":"AAEC/w=="}]}`
	for _, l := range lines {
		if l != want {
			t.Fatalf("recv printed\n%s\nwant\n%s", l, want)
		}
	}
}

func TestSendRecvReadableOutAndEncoded(t *testing.T) {
	a := newPipeAdv(t, "secure")
	out := t.TempDir()
	key := filepath.Join(t.TempDir(), "id.key")
	recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--key", key, "--out", out, "--count", "1")
	doc := bytes.Repeat([]byte("<employee><name>Ryan</name></employee>\n"), 500)
	docFile := writeFile(t, "doc.xml", doc)
	r := run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "note=see attached",
		"--elem", "doc=@"+docFile, "--encode", "zstd:3,seal", "--select", "doc")
	if r.code != 0 {
		t.Fatalf("send: exit %d: %s", r.code, r.stderr)
	}
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv exit %d: %s", code, recv.stderr)
	}
	text := recv.stdout.String()
	if !strings.Contains(text, "message 1 from 12D3") || !strings.Contains(text, "note (text/plain;charset=UTF-8): see attached") ||
		!strings.Contains(text, "doc (application/octet-stream, zstd+seal key peer:") || !strings.Contains(text, " bytes on the wire): 19500 bytes") {
		t.Fatalf("recv printed %q", text)
	}
	got, err := os.ReadFile(filepath.Join(out, "000001-01-doc"))
	if err != nil || !bytes.Equal(got, doc) {
		t.Fatalf("--out file: %v (%d bytes)", err, len(got))
	}
}

// TestRecvCountsElements: recv's header line counts elements in English,
// "(1 element)" and "(2 elements)" (before: "(1 elements)").
func TestRecvCountsElements(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--count", "2")
	for _, elems := range [][]string{{"--elem", "a=one"}, {"--elem", "a=one", "--elem", "b=two"}} {
		if r := run(t, nil, append([]string{"send", "--pipe", a, "--peer", recv.addrs[0]}, elems...)...); r.code != 0 {
			t.Fatalf("send: exit %d: %s", r.code, r.stderr)
		}
	}
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv exit %d: %s", code, recv.stderr)
	}
	text := recv.stdout.String()
	for _, want := range []string{"message 1 from 12D3", " (1 element)\n", "message 2 from 12D3", " (2 elements)\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("recv printed %q, want %q", text, want)
		}
	}
}

// TestSocket10MiB: a 10 MiB file crosses send --socket / recv --socket
// byte for byte, and both exit 0. The data goes through files, not this
// process's memory: children inherit its peak RSS, which other tests
// measure.
func TestSocket10MiB(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	dir := t.TempDir()
	in, err := os.Create(filepath.Join(dir, "in"))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	rng := rand.New(rand.NewPCG(3, 4))
	chunk := make([]byte, 64<<10)
	for range 160 {
		for i := range chunk {
			chunk[i] = byte(rng.Uint32())
		}
		in.Write(chunk)
		h.Write(chunk)
	}
	want := h.Sum(nil)
	in.Seek(0, io.SeekStart)
	defer in.Close()
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	recv := startTo(t, nil, out, "recv", "--socket", "--pipe", a, "--listen", loopback)
	send := exec.Command(binary_, "send", "--socket", "--pipe", a, "--peer", recv.addrs[0])
	send.Stdin = in
	var serr bytes.Buffer
	send.Stderr = &serr
	if err := send.Run(); err != nil {
		t.Fatalf("send --socket: %v: %s", err, serr.Bytes())
	}
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv --socket exit %d: %q", code, recv.stderr)
	}
	out.Seek(0, io.SeekStart)
	h.Reset()
	n, err := io.Copy(h, out)
	if err != nil || !bytes.Equal(h.Sum(nil), want) {
		t.Fatalf("received %d bytes, not the %d sent (%v)", n, 10<<20, err)
	}
}

func TestSendErrors(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	other := newPipeAdv(t, "unicast")
	recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback)
	dead := "/ip4/127.0.0.1/tcp/1/p2p/" + recv.addrs[0][strings.LastIndex(recv.addrs[0], "/")+1:]
	for name, args := range map[string][]string{
		"unknown pipe": {"send", "--pipe", other, "--peer", recv.addrs[0], "--elem", "x=y", "--timeout", "10s"},
		"dead peer": {"send", "--pipe", a, "--elem", "x=y", "--timeout", "10s",
			"--peer", "/ip4/127.0.0.1/tcp/1/p2p/" + recv.addrs[0][strings.LastIndex(recv.addrs[0], "/")+1:]},
		"missing file": {"send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "x=@/nonexistent"},
	} {
		t.Run(name, func(t *testing.T) {
			r := run(t, nil, args...)
			failsCleanly(t, r)
			if r.code != 1 {
				t.Errorf("exit %d, want 1", r.code)
			}
			want := map[string]string{"unknown pipe": "no peer found with the pipe bound", "dead peer": "connect",
				"missing file": "no such file"}[name]
			if !strings.Contains(string(r.stderr), want) {
				t.Errorf("stderr %q does not say %q", r.stderr, want)
			}
			if name == "missing file" && strings.Count(string(r.stderr), "no such file or directory") != 1 {
				t.Errorf("stderr %q does not say the cause once", r.stderr)
			}
		})
	}
	for _, args := range [][]string{
		{"send", "--pipe", a, "--elem", "x=y"},                              // no peer
		{"send", "--pipe", a, "--peer", "/ip4/127.0.0.1/tcp/1"},             // no /p2p/, no elements
		{"send", "--pipe", a, "--peer", recv.addrs[0]},                      // nothing to send
		{"send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "novalue"}, // bad element
		{"recv", "--socket", "--json", "--pipe", a},
		{"recv", "--pipe", a, "--listen", "foo"}, // not a multiaddr
		{"send", "--pipe", a, "--peer", dead, "--elem", "x=y", "--timeout", "-1s"},
		{"codec", "encode", "--codec", "gzip", "--max-size", "-1"},
		{"msg", "encode", "--max-size", "0"},
		{"adv", "show", "--max-size", "-5", a},
		{"recv", "--pipe", a, "--listen", "/ip4/127.0.0.1/tcp/99999"},                       // no such port
		{"send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "x=y", "--encode", "lzma"}, // unknown codec
		// A wrong --encode is reported as such, before connecting: with
		// no one at the address, too.
		{"send", "--pipe", a, "--peer", dead, "--elem", "x=y", "--encode", "lzma"},
		{"send", "--pipe", a, "--peer", dead, "--elem", "x=y", "--encode", "gzip:42"},
		{"send", "--pipe", a, "--peer", dead, "--elem", "x=y", "--encode", "xml@99"},
	} {
		r := run(t, nil, args...)
		failsCleanly(t, r)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", args, r.code)
		}
	}
}

// TestSendToReceiverThatLeaves: a receiver takes one message and exits
// while send still sends; send fails saying first that the peer reset
// the stream (before: the pipe's ID and the endpoint's account came
// first, the cause last, ~260 characters in).
func TestSendToReceiverThatLeaves(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--count", "1")
	r := run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "x=y", "--count", "1000000")
	failsCleanly(t, r)
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	// Which of the connection's ends the sender sees go first depends on
	// the timing, and so does whether recv's handler was still there to
	// refuse the messages after its one; each is a cause said first.
	line := strings.TrimPrefix(string(r.stderr), "p2pmsg: ")
	// A receiver that shuts down asks its senders to end their streams:
	// the next message finds it gone.
	if !slices.ContainsFunc([]string{"the peer reset the stream: ", "connection reset by peer: ", "broken pipe: ",
		"refused by the receiver: the receiver has stopped (", "the peer went away: "}, func(c string) bool {
		return strings.HasPrefix(line, c)
	}) {
		t.Errorf("stderr %q does not lead with why", r.stderr)
	}
	if code := recv.wait(t); code != 0 {
		t.Errorf("recv exit %d: %q", code, recv.stderr)
	}
}

func TestID(t *testing.T) {
	key := filepath.Join(t.TempDir(), "id.key")
	first := run(t, nil, "id", "--key", key)
	again := run(t, nil, "id", "--key", key)
	if first.code != 0 || !bytes.Equal(first.stdout, again.stdout) {
		t.Fatalf("id: %s / %s / %s", first.stdout, again.stdout, first.stderr)
	}
	for _, want := range []string{"peer id:          12D3", "jxta peer id:     urn:jxta:cbid-", "jxta tcp peer id: urn:jxta:cbid-59616261646162614A78746150325033"} {
		if !bytes.Contains(first.stdout, []byte(want)) {
			t.Fatalf("id printed %q, want %q", first.stdout, want)
		}
	}
	for _, f := range []string{key, key + ".jxta"} {
		if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("key file %s: %v %v", f, st, err)
		}
	}
	os.Chmod(key+".jxta", 0o644)
	failsCleanly(t, run(t, nil, "id", "--key", key))
	os.Chmod(key+".jxta", 0o600)
	os.Chmod(key, 0o644)
	failsCleanly(t, run(t, nil, "id", "--key", key))
}

// TestKeyNotARegularFile: a --key (or --psk) path naming a directory or a
// FIFO is refused saying what it is (before: "node: unusable key file:
// DIR is not a regular file (d---------)", the mode with its bits masked).
func TestKeyNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Symbolic links are followed; one to nothing is named as such, as
	// the key is not created through it (before: "file exists: node:
	// unusable key file: open LINK").
	toDir, dangling, nowhere := filepath.Join(dir, "to-dir"), filepath.Join(dir, "dangling"), filepath.Join(dir, "nowhere")
	if err := os.Symlink(dir, toDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(nowhere, dangling); err != nil {
		t.Fatal(err)
	}
	a := newPipeAdv(t, "unicast")
	peer := "/ip4/127.0.0.1/tcp/9/p2p/12D3KooWEVzyf8Ryzp5sV2RWj3En5jx3FrEUbPcaW8wVHT9vKfCY" // never reached
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"id", "--key", dir}, "--key " + dir + ": is a directory"},
		{[]string{"id", "--key", toDir}, "--key " + toDir + ": is a directory"},
		{[]string{"id", "--key", dangling}, "--key " + dangling + ": is a symbolic link to " + nowhere + ", which does not exist"},
		{[]string{"recv", "--pipe", a, "--key", dangling, "--count", "1"}, "--key " + dangling + ": is a symbolic link to " + nowhere + ", which does not exist"},
		{[]string{"id", "--key", fifo}, "--key " + fifo + ": is a named pipe (FIFO)"},
		{[]string{"codec", "decode", "--identity", dir}, "--identity " + dir + ": is a directory"},
		{[]string{"recv", "--pipe", a, "--key", dir, "--count", "1"}, "--key " + dir + ": is a directory"},
		{[]string{"send", "--pipe", a, "--peer", peer, "--elem", "x=y", "--key", dir}, "--key " + dir + ": is a directory"},
		{[]string{"send", "--pipe", a, "--peer", peer, "--elem", "x=y", "--encode", "seal", "--psk", dir}, "pre-shared key " + dir + ": is a directory"},
	} {
		r := run(t, nil, tc.args...)
		failsCleanly(t, r)
		if got := strings.TrimSpace(strings.TrimPrefix(string(r.stderr), "p2pmsg: ")); got != tc.want {
			t.Errorf("%v: stderr %q, want %q", tc.args, r.stderr, tc.want)
		}
	}
}

// TestKeyDirectoriesNotCreated: a --key path in a directory that does not
// exist is an error, and nothing is created; only the default identity's
// directory is made.
func TestKeyDirectoriesNotCreated(t *testing.T) {
	base := t.TempDir()
	key := filepath.Join(base, "no", "such", "dir", "k")
	for _, args := range [][]string{{"id", "--key", key}, {"recv", "--pipe", newPipeAdv(t, "unicast"), "--key", key, "--count", "1"}} {
		failsCleanly(t, run(t, nil, args...))
		if _, err := os.Stat(filepath.Join(base, "no")); !os.IsNotExist(err) {
			t.Fatalf("%v created directories: %v", args, err)
		}
	}
	cfg := t.TempDir()
	r := runEnv(t, []string{"XDG_CONFIG_HOME=" + cfg}, nil, "id")
	if r.code != 0 {
		t.Fatalf("id with the default key: exit %d: %s", r.code, r.stderr)
	}
	if st, err := os.Stat(filepath.Join(cfg, "p2pmsg")); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("default identity directory: %v %v", st, err)
	}
}

// TestKeyFilesMustBeRegular points the identity and pre-shared key paths
// at a device, a FIFO, a directory and an oversized file: each is refused
// with one line before anything is read from it (reading /dev/zero would
// never end; opening a FIFO blocks until someone writes to it).
func TestKeyFilesMustBeRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := writeFile(t, "big", make([]byte, 1<<20))
	for _, path := range []string{"/dev/zero", fifo, dir, big} {
		for _, args := range [][]string{
			{"id", "--key", path},
			{"codec", "encode", "--codec", "seal", "--key", path},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang, not a timing bound
			cmd := exec.CommandContext(ctx, binary_, args...)
			cmd.Stdin = strings.NewReader("x")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			hung := ctx.Err() != nil
			cancel()
			if hung {
				t.Fatalf("%v did not return", args)
			}
			if err == nil || cmd.ProcessState.ExitCode() != 1 || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
				t.Errorf("%v: %v, stderr %q", args, err, stderr.String())
			}
		}
	}
}

func TestCodecEncodeDecode(t *testing.T) {
	doc := bytes.Repeat([]byte("<employee id=\"1\"><lname>Smith</lname></employee>"), 300)
	psk := writeFile(t, "psk", []byte(strings.Repeat("ab", 32)))
	wrong := writeFile(t, "wrong", []byte(strings.Repeat("cd", 32)))
	for _, c := range [][]string{{"--codec", "gzip", "--level", "9"}, {"--codec", "zstd:19"}, {"--codec", "s2"}, {"--codec", "deflate:6,seal", "--key", psk}} {
		enc := run(t, doc, append([]string{"codec", "encode"}, c...)...)
		if enc.code != 0 || len(enc.stdout) >= len(doc) {
			t.Fatalf("%v: exit %d, %d bytes: %s", c, enc.code, len(enc.stdout), enc.stderr)
		}
		args := []string{"codec", "decode"}
		if len(c) > 2 && c[2] == "--key" {
			failsCleanly(t, run(t, enc.stdout, "codec", "decode"))                 // no key
			failsCleanly(t, run(t, enc.stdout, "codec", "decode", "--key", wrong)) // wrong key
			tampered := bytes.Clone(enc.stdout)
			tampered[len(tampered)-1] ^= 1
			failsCleanly(t, run(t, tampered, "codec", "decode", "--key", psk))
			args = append(args, "--key", psk)
		}
		dec := run(t, enc.stdout, args...)
		if dec.code != 0 || !bytes.Equal(dec.stdout, doc) {
			t.Fatalf("%v: decode exit %d: %s", c, dec.code, dec.stderr)
		}
	}
	// A frame that claims more than --max-size is refused before decoding.
	enc := run(t, doc, "codec", "encode", "--codec", "zstd")
	failsCleanly(t, run(t, enc.stdout, "codec", "decode", "--max-size", "1000"))
	failsCleanly(t, run(t, []byte("not a frame"), "codec", "decode"))
	failsCleanly(t, run(t, nil, "codec", "encode"))
}

// TestRecvSkipsUndecodable: a message recv cannot decode is reported on
// stderr and skipped; the receiver goes on.
func TestRecvSkipsUndecodable(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--count", "1")
	psk := writeFile(t, "psk", []byte(strings.Repeat("ab", 32)))
	// The receiver has no key for it: the sender learns so, and fails.
	r := run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "x=secret", "--encode", "seal", "--psk", psk)
	failsCleanly(t, r)
	if !bytes.Contains(r.stderr, []byte("not delivered")) || !bytes.Contains(r.stderr, []byte("not decoded")) {
		t.Fatalf("send said %q, want the receiver's refusal", r.stderr)
	}
	r = run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "x=\x1b[2Jplain")
	if r.code != 0 {
		t.Fatalf("send: %s", r.stderr)
	}
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv exit %d: %q", code, recv.stderr)
	}
	if !strings.Contains(strings.Join(recv.stderr, "\n"), " refused: ") {
		t.Fatalf("stderr %q does not report the refused message", recv.stderr)
	}
	if out := recv.stdout.String(); !strings.Contains(out, `x (text/plain;charset=UTF-8): \x1b[2Jplain`) {
		t.Fatalf("recv printed %q", out)
	}
}

// TestSendRefusedLeadsWithReason: a message the receiver refuses fails
// send with one line that leads with the refusal and the receiver's
// reason, not with the pipe's ID (the chain put the reason last, after
// some 180 characters of pipe and peer IDs).
func TestSendRefusedLeadsWithReason(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--count", "1")
	psk := writeFile(t, "psk", []byte(strings.Repeat("ab", 32)))
	r := run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "x=secret", "--encode", "seal", "--psk", psk)
	failsCleanly(t, r)
	const want = "p2pmsg: refused by the receiver: not decoded: "
	if !bytes.HasPrefix(r.stderr, []byte(want)) || !bytes.Contains(r.stderr, []byte("1 message not delivered")) {
		t.Fatalf("send said %q, want it to start with %q and say how many were not delivered", r.stderr, want)
	}
	if r := run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "x=plain"); r.code != 0 {
		t.Fatalf("send: %s", r.stderr)
	}
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv exit %d: %q", code, recv.stderr)
	}
}

// TestRecvPSKRequiresSealed is issue 21's row 7 at the command line: a
// receiver given --psk refuses elements that do not come sealed with that
// key, and says how each element it prints was protected.
func TestRecvPSKRequiresSealed(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	psk := writeFile(t, "psk", []byte(strings.Repeat("ab", 32)))
	recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--count", "1", "--psk", psk)
	for i, args := range [][]string{
		{"--elem", "x=plain"},                      // not sealed
		{"--elem", "x=zipped", "--encode", "zstd"}, // protected otherwise
		{"--elem", "x=sealed", "--encode", "zstd,seal", "--psk", psk},
	} {
		r := run(t, nil, append([]string{"send", "--pipe", a, "--peer", recv.addrs[0]}, args...)...)
		if i < 2 { // refused by the receiver: the sender must not exit 0
			failsCleanly(t, r)
			if !bytes.Contains(r.stderr, []byte("not protected as the receiver requires")) {
				t.Fatalf("send %v said %q, want the receiver's reason", args, r.stderr)
			}
			continue
		}
		if r.code != 0 {
			t.Fatalf("send %v: %s", args, r.stderr)
		}
	}
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv exit %d: %q", code, recv.stderr)
	}
	stderr := strings.Join(recv.stderr, "\n")
	if strings.Count(stderr, " refused: ") != 2 || !strings.Contains(stderr, "not protected as the receiver requires") {
		t.Fatalf("stderr %q does not report two refused messages", stderr)
	}
	// The key is named by the first 4 bytes of its SHA-256.
	if out := recv.stdout.String(); !strings.Contains(out, "x (text/plain;charset=UTF-8, zstd+seal key psk:9a2db2e2, ") || !strings.Contains(out, " bytes on the wire): sealed") ||
		strings.Contains(out, "): plain") || strings.Contains(out, "zipped") {
		t.Fatalf("recv printed %q", out)
	}
}

// TestRecvPrintsPeerTextSafely has a real peer (send) put terminal escape
// sequences, a newline, a bidirectional override and a C1 control in
// element names, the namespace, the MIME type and the body: recv prints
// none of them raw, in its readable output or as JSON, so no fake
// "message from" line, window title or cursor movement reaches the
// terminal.
func TestRecvPrintsPeerTextSafely(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	const (
		name = "x\x1b]0;pwned\x07\nmessage 2 from 12D3KooWFake (1 element)"
		ns   = "n\u202es"
		mime = "text/plain;x=\"\x1b[31m\u009b\""
		body = "line1\r\x1b[2K\u009b31mline2"
	)
	for _, asJSON := range []bool{false, true} {
		args := []string{"recv", "--pipe", a, "--listen", loopback, "--count", "1"}
		if asJSON {
			args = append(args, "--json")
		}
		recv := start(t, nil, args...)
		r := run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--ns", ns, "--mime", mime, "--elem", name+"="+body)
		if r.code != 0 {
			t.Fatalf("send: %s", r.stderr)
		}
		if code := recv.wait(t); code != 0 {
			t.Fatalf("recv exit %d: %q", code, recv.stderr)
		}
		out := recv.stdout.String()
		for _, bad := range []string{"\x1b", "\x07", "\r", "\u202e", "\u009b"} {
			if strings.Contains(out, bad) {
				t.Errorf("json=%v: recv printed %q raw in %q", asJSON, bad, out)
			}
		}
		if lines := strings.Count(out, "\n"); !asJSON && lines != 2 || asJSON && lines != 1 {
			t.Errorf("json=%v: %d lines in %q", asJSON, lines, out)
		}
		if !asJSON && !strings.Contains(out, `x\x1b]0;pwned\x07\nmessage 2 from`) {
			t.Errorf("the name is not shown escaped: %q", out)
		}
	}
}

// TestRuntimeErrorsNameNoPackage: errors that end in a package's sentinel
// (node.ErrAddrInUse, node.ErrKeyFile, adv.ErrWrongRoot,
// pipe.ErrNotResolved) read in the command's terms, without the package's
// name, and still lead with their cause. The first case is also issue
// 25's: a second recv on a TCP port the first one holds fails at once,
// rather than sharing the port (and its messages) with it.
func TestRuntimeErrorsNameNoPackage(t *testing.T) {
	listen := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", freePort(t))
	a := newPipeAdv(t, "unicast")
	start(t, nil, "recv", "--pipe", a, "--listen", listen)
	notAdv := filepath.Join(t.TempDir(), "doc.xml")
	if err := os.WriteFile(notAdv, []byte("<employees/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	// a peer that is not running: the port was free a moment ago
	nobody := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d/p2p/12D3KooW9suqg6kP3tGot834fU9y5fqutG2Whjcs2gJVTJtNzGeH", freePort(t))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"port in use", []string{"recv", "--pipe", a, "--listen", listen, "--key", filepath.Join(t.TempDir(), "k")}, "p2pmsg: listen address in use: " + listen},
		{"key in a missing directory", []string{"recv", "--pipe", a, "--listen", loopback, "--key", filepath.Join(t.TempDir(), "nosuch", "k")}, "p2pmsg: no such file or directory: unusable key file: "},
		{"not a pipe advertisement", []string{"send", "--pipe", notAdv, "--peer", nobody, "--elem", "text=hi"}, "p2pmsg: pipe advertisement " + notAdv + ": not a pipe advertisement: "},
		{"peer not running", []string{"send", "--pipe", a, "--peer", nobody, "--elem", "text=hi"}, "p2pmsg: connection refused: resolving urn:jxta:cbid-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, nil, tc.args...)
			failsCleanly(t, r)
			if !strings.HasPrefix(string(r.stderr), tc.want) {
				t.Errorf("stderr %q, want it to begin %q", r.stderr, tc.want)
			}
			for _, pkg := range []string{"node: ", "adv: ", "pipe: "} {
				if bytes.Contains(r.stderr, []byte(pkg)) {
					t.Errorf("stderr %q names the package %q", r.stderr, pkg)
				}
			}
		})
	}
}

// freePort is a TCP port on loopback that was free when it returned.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestSelectMatchingNothingWarns: --select naming no element of the
// message says so; the message still goes, unencoded.
func TestSelectMatchingNothingWarns(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--json", "--count", "1")
	r := run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "text=hello", "--encode", "zstd", "--select", "nosuch")
	if r.code != 0 {
		t.Fatalf("send: exit %d: %s", r.code, r.stderr)
	}
	if !bytes.Contains(r.stderr, []byte("warning: --select nosuch")) {
		t.Fatalf("send said %q, want a warning about --select nosuch", r.stderr)
	}
	if code := recv.wait(t); code != 0 || !strings.Contains(recv.stdout.String(), base64.StdEncoding.EncodeToString([]byte("hello"))) {
		t.Fatalf("recv exit %d: %s / %s", code, recv.stdout.String(), recv.stderr)
	}
}

// sendOpen starts send --socket to the pipe a at peer, writes n bytes
// and waits until some of them are in out, the stream still open. The
// sender is killed when the test ends. Its stderr goes to stderr, if
// one is given.
func sendOpen(t *testing.T, a, peer string, n int, out *os.File, stderr ...io.Writer) *exec.Cmd {
	t.Helper()
	send := exec.Command(binary_, "send", "--socket", "--pipe", a, "--peer", peer)
	send.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
	if len(stderr) > 0 {
		send.Stderr = stderr[0]
	}
	stdin, err := send.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := send.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); send.Process.Kill(); send.Wait() })
	stdin.Write(bytes.Repeat([]byte("x"), n))
	deadline := time.Now().Add(30 * time.Second)
	for {
		if st, _ := out.Stat(); st.Size() > 0 {
			return send
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing arrived")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// socketReceiver starts recv --socket on a new unicast pipe, writing to
// out (closed when the test ends).
func socketReceiver(t *testing.T) (a string, out *os.File, recv *daemon) {
	t.Helper()
	a = newPipeAdv(t, "unicast")
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	return a, out, startTo(t, nil, out, "recv", "--socket", "--pipe", a, "--listen", loopback)
}

// TestRecvSocketInterrupted: recv --socket cut short by SIGINT or SIGTERM
// mid-stream exits 128+signal, saying so, instead of 0 with truncated
// output; before any connection, too.
func TestRecvSocketInterrupted(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			a, out, recv := socketReceiver(t)
			sendOpen(t, a, recv.addrs[0], 4096, out)
			recv.cmd.Process.Signal(sig)
			if code := recv.wait(t); code != 128+int(sig) {
				t.Fatalf("recv --socket interrupted: exit %d, want %d; stderr %q", code, 128+int(sig), recv.stderr)
			}
			if !strings.Contains(strings.Join(recv.stderr, "\n"), "cut short") {
				t.Fatalf("stderr %q does not say the stream was cut short", recv.stderr)
			}
		})
	}
	t.Run("before a connection", func(t *testing.T) {
		recv := start(t, nil, "recv", "--socket", "--pipe", newPipeAdv(t, "unicast"), "--listen", loopback)
		recv.cmd.Process.Signal(syscall.SIGINT)
		if code := recv.wait(t); code != 130 {
			t.Fatalf("exit %d, want 130; stderr %q", code, recv.stderr)
		}
	})
}

// TestRecvCountInterrupted: recv --count N cut short by SIGINT, SIGTERM
// or SIGHUP (its terminal gone) before its Nth message exits 128+signal
// saying how many came, so that a script waiting for N messages (or
// timeout(1), which sends SIGTERM) does not read success; without
// --count, run until interrupted, it exits 0.
func TestRecvCountInterrupted(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sig   syscall.Signal
		count string
		code  int
	}{
		{"SIGINT", syscall.SIGINT, "3", 130},
		{"SIGTERM", syscall.SIGTERM, "3", 143},
		{"SIGHUP", syscall.SIGHUP, "3", 129},
		{"no count", syscall.SIGINT, "0", 0},
		{"no count SIGHUP", syscall.SIGHUP, "0", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.sig == syscall.SIGHUP {
				hupNotIgnored(t)
			}
			a := newPipeAdv(t, "unicast")
			recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--count", tc.count)
			if r := run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "x=y"); r.code != 0 {
				t.Fatalf("send: exit %d: %s", r.code, r.stderr)
			}
			recv.cmd.Process.Signal(tc.sig)
			if code := recv.wait(t); code != tc.code {
				t.Fatalf("recv --count %s interrupted by %v after 1 message: exit %d, want %d; stderr %q", tc.count, tc.sig, code, tc.code, recv.stderr)
			}
			if tc.code != 0 && !strings.Contains(strings.Join(recv.stderr, "\n"), " of 3 messages received") {
				t.Fatalf("stderr %q does not say how many messages came", recv.stderr)
			}
		})
	}
}

// hupNotIgnored has the binaries t starts begin with SIGHUP not ignored,
// as from a terminal, whatever this process inherited (nohup, a tool
// that ignores it): a signal this process catches starts at its default
// in a program it executes, an ignored one stays ignored.
func hupNotIgnored(t *testing.T) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGHUP)
	t.Cleanup(func() { signal.Stop(c) })
}

// TestRecvSocketSenderKilled: recv --socket whose sender is killed
// mid-stream (no close of any kind) exits 1 saying why, over libp2p
// (on TCP the connection is reset at once; a QUIC peer that dies says
// nothing, and quic-go's idle timeout ends the connection) and over
// JXTA's TCP transport, which has no keep-alives: the socket's idle probe
// finds the sender unreachable (about 17 s with the default probe).
func TestRecvSocketSenderKilled(t *testing.T) {
	libp2pCause := "p2pmsg: connection reset by peer: "
	if loopback == testutil.LoopbackQUIC {
		libp2pCause = "timeout: no recent network activity"
	}
	for _, tc := range []struct {
		name  string
		jxta  bool
		cause string
	}{
		{"libp2p", false, libp2pCause},
		{"jxta", true, "p2pmsg: the peer can no longer be reached: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newPipeAdv(t, "unicast")
			out, err := os.Create(filepath.Join(t.TempDir(), "out"))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			args := []string{"recv", "--socket", "--pipe", a, "--listen", loopback}
			if tc.jxta {
				args = append(args, "--jxta", "tcp://127.0.0.1:0")
			}
			recv := startTo(t, nil, out, args...)
			peerAddr := recv.addrs[0]
			for _, x := range recv.addrs {
				if rest, ok := strings.CutPrefix(x, "jxta "); ok && tc.jxta {
					peerAddr, _, _ = strings.Cut(rest, " ")
				}
			}
			send := sendOpen(t, a, peerAddr, 64<<10, out)
			send.Process.Kill()
			send.Wait()
			code := recv.wait(t)
			stderr := strings.Join(recv.stderr, "\n")
			if code != 1 || !strings.Contains(stderr, tc.cause) {
				t.Fatalf("recv --socket whose sender was killed: exit %d, stderr %q; want 1 and %q", code, stderr, tc.cause)
			}
		})
	}
}

// TestRecvThatCannotStartLeavesNoOutDir: a recv refused for its command
// line, or whose node cannot listen, makes no --out directory (before, it
// made it first and left it empty).
func TestRecvThatCannotStartLeavesNoOutDir(t *testing.T) {
	a := newPipeAdv(t, "propagate")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	inUse := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ln.Addr().(*net.TCPAddr).Port)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"--jxta", "tcp://127.0.0.1:0"}, 2}, // JXTA peers share unicast pipes only
		{[]string{"--jxta", "nosuch"}, 2},
		{[]string{"--listen", inUse}, 1},
	} {
		out := filepath.Join(t.TempDir(), "out")
		r := run(t, nil, append([]string{"recv", "--pipe", a, "--out", out, "--count", "1"}, tc.args...)...)
		failsCleanly(t, r)
		if r.code != tc.code {
			t.Errorf("%v: exit %d, want %d", tc.args, r.code, tc.code)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: failed (%q), but left its --out directory behind", tc.args, r.stderr)
		}
	}
}

// TestErrorsLeadWithTheCause: a dial that fails says why first, in a
// line that stays short, on a unicast pipe and on a propagate pipe, whose
// send waits for members only once a given peer is connected (before, it
// waited for them until --timeout and said "timed out: pipe …: 0 of 1
// members reachable").
func TestErrorsLeadWithTheCause(t *testing.T) {
	for _, typ := range []string{"unicast", "propagate"} {
		t.Run(typ, func(t *testing.T) { errorsLeadWithTheCause(t, typ) })
	}
}

func errorsLeadWithTheCause(t *testing.T, typ string) {
	a := newPipeAdv(t, typ)
	recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback)
	other := "12D3KooWJKWmB5J3akNxGH47LTGFCXPsune2cpA3yUQp85uTyaWA"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	wrongID, _, _ := strings.Cut(recv.addrs[0], "/p2p/")
	for _, tc := range []struct{ peer, cause string }{
		{fmt.Sprintf("/ip4/127.0.0.1/tcp/%d/p2p/%s", closed, other), "p2pmsg: connection refused: "},
		{wrongID + "/p2p/" + other, "p2pmsg: the peer at that address has another peer ID: "},
	} {
		r := run(t, nil, "send", "--pipe", a, "--peer", tc.peer, "--elem", "x=y", "--timeout", "20s")
		failsCleanly(t, r)
		if !bytes.HasPrefix(r.stderr, []byte(tc.cause)) || len(r.stderr) > 300 {
			t.Fatalf("send to %s said (%d bytes) %q, want it to start with %q", tc.peer, len(r.stderr), r.stderr, tc.cause)
		}
	}
}

// TestSendVerboseSizes: send --verbose says per element the codec and
// the sizes before and after.
func TestSendVerboseSizes(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--count", "1")
	doc := writeFile(t, "doc.xml", bytes.Repeat([]byte("<employee><name>Ryan</name></employee>\n"), 500))
	r := run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "doc=@"+doc, "--elem", "note=hi",
		"--encode", "zstd:3", "--select", "doc", "--verbose")
	if r.code != 0 {
		t.Fatalf("send: exit %d: %s", r.code, r.stderr)
	}
	var docLine, noteLine string
	for _, l := range strings.Split(string(r.stderr), "\n") {
		if strings.Contains(l, "element doc:") {
			docLine = l
		}
		if strings.Contains(l, "element note:") {
			noteLine = l
		}
	}
	var before, after int
	if _, err := fmt.Sscanf(docLine[strings.Index(docLine, "zstd,")+len("zstd,"):], " %d → %d bytes", &before, &after); err != nil || before != 19500 || after >= before {
		t.Fatalf("doc line %q (%d → %d, %v)", docLine, before, after, err)
	}
	if !strings.Contains(noteLine, "plain, 2 → 2 bytes") {
		t.Fatalf("note line %q", noteLine)
	}
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv exit %d: %s", code, recv.stderr)
	}
}

// TestSendPropagateEveryGivenPeer: send on a propagate pipe given two
// members with --peer reaches both: it waits until each is a member
// before publishing (before, it waited for one, and the other, whose
// subscription had not arrived yet, missed the message in two of three
// runs while send exited 0). Three rounds, since the old miss was a race.
func TestSendPropagateEveryGivenPeer(t *testing.T) {
	a := newPipeAdv(t, "propagate")
	for round := range 3 {
		r1 := start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--count", "1")
		r2 := start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--count", "1")
		msg := fmt.Sprintf("round %d", round)
		if r := run(t, nil, "send", "--pipe", a, "--peer", r1.addrs[0], "--peer", r2.addrs[0], "--elem", "t="+msg); r.code != 0 {
			t.Fatalf("send: exit %d: %s", r.code, r.stderr)
		}
		for i, d := range []*daemon{r1, r2} {
			select {
			case <-d.done:
			case <-time.After(30 * time.Second): // a hang, not a timing bound
				t.Fatalf("round %d: member %d did not get the message send published", round, i+1)
			}
			if code := d.wait(t); code != 0 || !strings.Contains(d.stdout.String(), msg) {
				t.Fatalf("round %d: member %d: exit %d, stdout %q", round, i+1, code, d.stdout.String())
			}
		}
	}
}

// TestSendPSKNeedsSeal: --psk is seal's key, so a chain without seal, or
// no --encode, with --psk is a wrong command line (before, the elements
// went in the clear and send exited 0, the key unused); auto, which
// never seals, combines with no codec, and says so.
func TestSendPSKNeedsSeal(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	psk := writeFile(t, "psk", []byte(strings.Repeat("ab", 32)))
	peer := "/ip4/127.0.0.1/tcp/9/p2p/12D3KooWEVzyf8Ryzp5sV2RWj3En5jx3FrEUbPcaW8wVHT9vKfCY" // never reached
	for _, tc := range []struct {
		args     []string
		mentions string
	}{
		{[]string{"--psk", psk}, "--psk"},
		{[]string{"--encode", "zstd", "--psk", psk}, "--psk"},
		{[]string{"--encode", "auto", "--psk", psk}, "--psk"},
		{[]string{"--encode", "auto,seal"}, "--encode auto"},
	} {
		r := run(t, nil, append([]string{"send", "--pipe", a, "--peer", peer, "--elem", "x=secret"}, tc.args...)...)
		failsCleanly(t, r)
		if r.code != 2 || !bytes.Contains(r.stderr, []byte(tc.mentions)) {
			t.Errorf("send %v: exit %d, %q; want 2 and a line about %s", tc.args, r.code, r.stderr, tc.mentions)
		}
	}
}

// TestSendVerboseChain: send --verbose names every codec of a chain, as
// recv does (zstd+seal), not only the outer one, whose header alone is
// in the clear.
func TestSendVerboseChain(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--count", "1")
	doc := writeFile(t, "doc.xml", bytes.Repeat([]byte("<employee><name>Ryan</name></employee>\n"), 500))
	r := run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "doc=@"+doc,
		"--encode", "zstd:3,seal", "--verbose")
	if r.code != 0 {
		t.Fatalf("send: exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(string(r.stderr), "message 1 element doc: zstd+seal, 19500 → ") {
		t.Fatalf("send --verbose said %q, want the element's chain, zstd+seal", r.stderr)
	}
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv exit %d: %s", code, recv.stderr)
	}
}

// TestRecvJSONReportsSizes: recv --json tells, per decoded element, the
// codec chain and its bytes as received and as decoded; a plain element
// has neither.
func TestRecvJSONReportsSizes(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--json", "--count", "1")
	doc := bytes.Repeat([]byte("<employee><name>Ryan</name></employee>\n"), 200)
	r := run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "note=hi", "--elem", "doc=@"+writeFile(t, "doc.xml", doc),
		"--encode", "zstd:3", "--select", "doc")
	if r.code != 0 {
		t.Fatalf("send: exit %d: %s", r.code, r.stderr)
	}
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv exit %d: %s", code, recv.stderr)
	}
	var m struct {
		Elements []struct {
			Name     string   `json:"name"`
			Codecs   []string `json:"codecs"`
			WireSize int      `json:"wire_size"`
			Size     int      `json:"size"`
		} `json:"elements"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(recv.stdout.String())), &m); err != nil || len(m.Elements) != 2 {
		t.Fatalf("recv printed %q: %v", recv.stdout.String(), err)
	}
	note, d := m.Elements[0], m.Elements[1]
	if note.Codecs != nil || note.WireSize != 0 || note.Size != 0 {
		t.Errorf("plain element reported as decoded: %+v", note)
	}
	if len(d.Codecs) != 1 || d.Codecs[0] != "zstd" || d.Size != len(doc) || d.WireSize <= 0 || d.WireSize >= d.Size {
		t.Errorf("encoded element reported as %+v (document %d bytes)", d, len(doc))
	}
}

// TestSendSocketFlagsThatDoNotApply: send --socket copies stdin, so the
// flags that shape a message are a usage error, not ignored: before,
// --count 3, --ns and --mime were dropped in silence and send dialled.
func TestSendSocketFlagsThatDoNotApply(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	nobody := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d/p2p/12D3KooW9suqg6kP3tGot834fU9y5fqutG2Whjcs2gJVTJtNzGeH", freePort(t))
	for _, extra := range [][]string{{"--count", "3"}, {"--count", "1"}, {"--ns", "app"}, {"--mime", "text/plain"}} {
		r := run(t, []byte("x"), append([]string{"send", "--socket", "--pipe", a, "--peer", nobody}, extra...)...)
		failsCleanly(t, r)
		if want := "p2pmsg: --socket sends stdin: "; r.code != 2 || !bytes.HasPrefix(r.stderr, []byte(want)) || !bytes.Contains(r.stderr, []byte(extra[0])) {
			t.Errorf("%v: exit %d, stderr %q; want 2, %q and %s named", extra, r.code, r.stderr, want, extra[0])
		}
	}
}

// TestSendSocketInterrupted: send --socket cut short by SIGINT mid-stream
// exits 130 saying so, and resets the socket, so that recv fails rather
// than taking the bytes that arrived for the whole stream.
func TestSendSocketInterrupted(t *testing.T) {
	a, out, recv := socketReceiver(t)
	var stderr bytes.Buffer
	send := sendOpen(t, a, recv.addrs[0], 4096, out, &stderr)
	send.Process.Signal(syscall.SIGINT)
	send.Wait()
	if code := send.ProcessState.ExitCode(); code != 130 {
		t.Errorf("send --socket interrupted: exit %d, want 130", code)
	}
	if n := strings.Count(stderr.String(), "SIGINT"); n != 1 {
		t.Errorf("send --socket interrupted said %q: the signal %d times, want once", stderr.String(), n)
	}
	if code := recv.wait(t); code != 1 {
		t.Errorf("recv --socket whose sender was interrupted: exit %d, want 1; stderr %q", code, recv.stderr)
	}
}

// TestSendSocketReceiverGone: send --socket whose receiver goes away
// mid-stream, while stdin is open and idle, fails at once saying the
// stream was reset (before, it noticed only when stdin next gave bytes or
// ended, which for an idle terminal or `tail -f` may be never).
func TestSendSocketReceiverGone(t *testing.T) {
	a, out, recv := socketReceiver(t)
	send := exec.Command(binary_, "send", "--socket", "--pipe", a, "--peer", recv.addrs[0])
	send.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
	var stderr bytes.Buffer
	send.Stderr = &stderr
	stdin, err := send.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := send.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { send.Wait(); close(exited) }()
	t.Cleanup(func() { stdin.Close(); send.Process.Kill(); <-exited })
	stdin.Write(bytes.Repeat([]byte("x"), 4096))
	for st, _ := out.Stat(); st.Size() == 0; st, _ = out.Stat() {
		select {
		case <-exited:
			t.Fatalf("send exited before anything arrived: %q", stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	recv.cmd.Process.Signal(syscall.SIGTERM)
	if code := recv.wait(t); code != 143 {
		t.Fatalf("recv --socket: exit %d, want 143; stderr %q", code, recv.stderr)
	}
	select {
	case <-exited:
	case <-time.After(time.Minute): // a hang, not a timing bound
		t.Fatal("send --socket, stdin open and idle, did not notice its receiver was gone")
	}
	if code := send.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "reset") {
		t.Fatalf("send --socket whose receiver left: exit %d, stderr %q; want 1 and a reset stream", code, stderr.String())
	}
}

// TestSendSocketReceiverInterrupted: recv --socket cut short by SIGINT
// while its sender's bytes are still arriving (here, its stdout is not
// read) resets the socket, so that send --socket fails: before, it closed
// the socket as at the end of a stream, and a sender whose stdin had
// ended read that as "the peer has read everything" and exited 0, while
// recv exited 130 with 98304 of 200000 bytes.
func TestSendSocketReceiverInterrupted(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close() })
	recv := startTo(t, nil, pw, "recv", "--socket", "--pipe", a, "--listen", loopback)
	pw.Close() // recv holds its own copy
	send, stderr, exited := startSendSocket(t, a, recv.addrs[0], 200000)
	if _, err := pr.Read(make([]byte, 1)); err != nil { // the stream has started
		t.Fatal(err)
	}
	recv.cmd.Process.Signal(syscall.SIGINT)
	// recv's stdout stays unread until send has exited: were it drained
	// at once, recv could copy the whole stream and end cleanly before
	// the signal's reset, and both would rightly exit 0.
	select {
	case <-exited:
	case <-time.After(time.Minute): // a hang, not a timing bound
		t.Fatal("send --socket did not exit after its receiver was interrupted")
	}
	go io.Copy(io.Discard, pr) // recv's writes to stdout may go on now
	if code := recv.wait(t); code != 130 {
		t.Fatalf("recv --socket interrupted: exit %d, want 130; stderr %q", code, recv.stderr)
	}
	if code := send.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("send --socket whose receiver was interrupted mid-stream: exit %d, want 1; stderr %q", code, stderr.String())
	}
}

// startSendSocket starts send --socket to the pipe a at peer with n bytes
// on its stdin, and returns it, its stderr and a channel closed once it
// has exited (it is killed at the test's end).
func startSendSocket(t *testing.T, a, peer string, n int) (*exec.Cmd, *bytes.Buffer, <-chan struct{}) {
	t.Helper()
	send := exec.Command(binary_, "send", "--socket", "--pipe", a, "--peer", peer)
	send.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
	send.Stdin = bytes.NewReader(bytes.Repeat([]byte("y"), n))
	stderr := new(bytes.Buffer)
	send.Stderr = stderr
	if err := send.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { send.Wait(); close(exited) }()
	t.Cleanup(func() { send.Process.Kill(); <-exited })
	return send, stderr, exited
}

// TestSendInterrupted: send cut short by SIGINT while it connects exits
// 130 and says it was interrupted, not 1 with "context canceled". The
// peer is a TCP listener that accepts and never answers, so send is
// still connecting when the signal comes.
func TestSendInterrupted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	peerAddr := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d/p2p/12D3KooWJKWmB5J3akNxGH47LTGFCXPsune2cpA3yUQp85uTyaWA", ln.Addr().(*net.TCPAddr).Port)
	send := exec.Command(binary_, "send", "--pipe", newPipeAdv(t, "unicast"), "--peer", peerAddr, "--elem", "x=y", "--timeout", "0")
	send.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
	var stderr bytes.Buffer
	send.Stderr = &stderr
	if err := send.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { send.Process.Kill(); send.Wait() })
	c, ok := <-accepted // send has its signal handler before it dials
	if !ok {
		t.Fatal("send never connected")
	}
	defer c.Close()
	send.Process.Signal(syscall.SIGINT)
	send.Wait()
	if code := send.ProcessState.ExitCode(); code != 130 || !strings.HasPrefix(stderr.String(), "p2pmsg: interrupted by SIGINT: ") {
		t.Fatalf("send interrupted: exit %d, stderr %q; want 130 and \"p2pmsg: interrupted by SIGINT: …\"", code, stderr.String())
	}
}

// TestBuiltinModelsDecodeElsewhere: what one process encodes naming a
// built-in model (xml@employees, zstd:19@dataset) another decodes with no
// --model file, as codec decode and as recv: both ends hold the same
// built-in models.
func TestBuiltinModelsDecodeElsewhere(t *testing.T) {
	dir := t.TempDir()
	if r := run(t, nil, "lab", "docs", "--out", dir); r.code != 0 {
		t.Fatalf("lab docs: exit %d: %s", r.code, r.stderr)
	}
	docFile := filepath.Join(dir, "report.xml")
	doc, err := os.ReadFile(docFile)
	if err != nil {
		t.Fatal(err)
	}
	specs := []string{"xml@employees", "xml@dataset", "zstd@employees", "zstd:19@dataset"}
	for _, spec := range specs {
		enc := run(t, doc, "codec", "encode", "--codec", spec)
		if enc.code != 0 {
			t.Fatalf("codec encode --codec %s: exit %d: %s", spec, enc.code, enc.stderr)
		}
		if dec := run(t, enc.stdout, "codec", "decode"); dec.code != 0 || !bytes.Equal(dec.stdout, doc) {
			t.Fatalf("codec decode of %s: exit %d: %s", spec, dec.code, dec.stderr)
		}
	}
	a := newPipeAdv(t, "unicast")
	recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--count", fmt.Sprint(len(specs)))
	for _, spec := range specs {
		r := run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "doc=@"+docFile, "--encode", spec)
		if r.code != 0 {
			t.Fatalf("send --encode %s: exit %d: %s", spec, r.code, r.stderr)
		}
	}
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv exit %d: %s", code, recv.stderr)
	}
}

// TestLabInterrupted: an experiment cut short by SIGINT exits 130 saying
// so, as send and recv do, not 1 with "context canceled".
func TestLabInterrupted(t *testing.T) {
	// Its first progress line: it runs, its handler is in place.
	code, last := interrupted(t, []string{"XDG_CONFIG_HOME=" + t.TempDir()}, func(string) bool { return true }, "lab", "amtt", "--profile", "dsl")
	if code != 130 || !strings.HasPrefix(last, "p2pmsg: interrupted by SIGINT: ") {
		t.Fatalf("lab amtt interrupted: exit %d, last line %q; want 130 and \"p2pmsg: interrupted by SIGINT: …\"", code, last)
	}
}

// TestRecvRefusesWhatItCannotWrite: a message recv --out cannot write
// (here its directory was removed under it; in the operator's soak, a
// full disk) is refused back to its sender, which fails, rather than
// acknowledged and then lost when recv exits 1 without it (send exited 0
// before: the acknowledgement went out once the message decoded).
func TestRecvRefusesWhatItCannotWrite(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	out := filepath.Join(t.TempDir(), "out")
	recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--out", out)
	if err := os.Remove(out); err != nil { // made, empty, once recv listens
		t.Fatal(err)
	}
	r := run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "x=hello")
	failsCleanly(t, r)
	if !bytes.Contains(r.stderr, []byte("could not print or write it")) || bytes.Contains(r.stderr, []byte(out)) {
		t.Errorf("send said %q, want the receiver's refusal without its path", r.stderr)
	}
	if code := recv.wait(t); code != 1 {
		t.Fatalf("recv exit %d, want 1: %q", code, recv.stderr)
	}
}

// TestRecvOutContinuesNumbering: a recv restarted on the --out directory
// of an earlier one numbers its messages on from the last there, rather
// than writing over the earlier messages' files (the operator's soak: a
// restarted recv replaced 000001-00-text with the new run's message).
func TestRecvOutContinuesNumbering(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	out := t.TempDir()
	for _, text := range []string{"first run", "second run"} {
		recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--out", out, "--count", "1")
		if r := run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "text="+text); r.code != 0 {
			t.Fatalf("send: exit %d: %s", r.code, r.stderr)
		}
		if code := recv.wait(t); code != 0 {
			t.Fatalf("recv exit %d: %q", code, recv.stderr)
		}
	}
	for file, want := range map[string]string{"000001-00-text": "first run", "000002-00-text": "second run"} {
		if got := readFile(t, filepath.Join(out, file)); string(got) != want {
			t.Errorf("%s: %q, want %q", file, got, want)
		}
	}
}

// TestRecvRefusalsCollapsed: a sender whose every message recv refuses
// (sealed with a key recv does not hold, four sends of one, by one peer
// identity) costs recv's stderr two lines, the first and, when recv
// ends, the last with how many came between, rather than a line each
// (the operator's soak: 9,436 lines in four minutes from one sender
// retrying).
func TestRecvRefusalsCollapsed(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback)
	psk := writeFile(t, "psk", []byte(strings.Repeat("ab", 32)))
	key := filepath.Join(t.TempDir(), "sender.key") // one identity for the four
	for range 4 {
		failsCleanly(t, run(t, nil, "send", "--pipe", a, "--peer", recv.addrs[0], "--key", key, "--elem", "x=secret", "--encode", "seal", "--psk", psk))
	}
	recv.cmd.Process.Signal(syscall.SIGINT)
	if code := recv.wait(t); code != 0 {
		t.Fatalf("recv exit %d: %q", code, recv.stderr)
	}
	checkFourCollapsed(t, recv.stderr, " refused: ")
}

// checkFourCollapsed checks that the stderr lines holding marker report
// four messages of one sender, sent within seconds, in two lines: the
// first, and at the end the last with the two between counted.
func checkFourCollapsed(t *testing.T, stderr []string, marker string) {
	t.Helper()
	var lines []string
	for _, l := range stderr {
		if strings.Contains(l, marker) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 || !strings.HasSuffix(lines[1], "(and 2 more from this peer before it)") {
		t.Fatalf("4 messages of one sender reported in %d lines, want 2 (the last counting 2 more): %q", len(lines), lines)
	}
}
