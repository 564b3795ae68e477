package cli_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/p2pmsg/p2pmsg/internal/datasets"
)

// TestLabDocs: `lab docs --out DIR` writes the README's documents, the
// same bytes as the corpora they come from; a second run changes nothing;
// a file of the same name with other bytes is kept unless --force.
func TestLabDocs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "try")
	want := map[string][]byte{
		"doc.xml":    datasets.Employees(100),
		"report.xml": datasets.DataSet(110),
		"big.xml":    datasets.Employees(1000),
	}
	for range 2 {
		r := run(t, nil, "lab", "docs", "--out", dir)
		if r.code != 0 {
			t.Fatalf("lab docs: exit %d: %s", r.code, r.stderr)
		}
		for name, data := range want {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%s: %v, %d bytes, want the corpus's %d", name, err, len(got), len(data))
			}
			if !bytes.Contains(r.stdout, []byte(name)) {
				t.Errorf("stdout does not name %s: %q", name, r.stdout)
			}
		}
	}

	mine := filepath.Join(dir, "doc.xml")
	if err := os.WriteFile(mine, []byte("<mine/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	failsCleanly(t, run(t, nil, "lab", "docs", "--out", dir))
	if got, _ := os.ReadFile(mine); string(got) != "<mine/>" {
		t.Fatalf("lab docs overwrote a file of other bytes without --force")
	}
	if r := run(t, nil, "lab", "docs", "--out", dir, "--force"); r.code != 0 {
		t.Fatalf("lab docs --force: exit %d: %s", r.code, r.stderr)
	}
	if got, _ := os.ReadFile(mine); !bytes.Equal(got, want["doc.xml"]) {
		t.Fatalf("lab docs --force left doc.xml as it was")
	}

	r := run(t, nil, "lab", "docs")
	failsCleanly(t, r)
	if r.code != 2 {
		t.Fatalf("lab docs without --out: exit %d, want 2", r.code)
	}
}

// example is one shell command of a ```sh block, continuation lines
// joined.
type example struct {
	where string // file:line
	cmd   string
}

// shellExamples returns the commands of the ```sh blocks of a Markdown
// file, comment and blank lines left out.
func shellExamples(t *testing.T, path string) []example {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []example
	in := false
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case !in && strings.HasPrefix(line, "```sh"):
			in = true
			continue
		case in && strings.HasPrefix(line, "```"):
			in = false
			continue
		case !in:
			continue
		}
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 {
			if trimmed == "" || strings.HasPrefix(trimmed, "#") {
				continue
			}
			start = i + 1
		}
		if c, ok := strings.CutSuffix(strings.TrimRight(line, " "), "\\"); ok {
			cur.WriteString(strings.TrimSpace(c) + " ")
			continue
		}
		cur.WriteString(trimmed)
		out = append(out, example{where: filepath.Base(path) + ":" + strconv.Itoa(start), cmd: cur.String()})
		cur.Reset()
	}
	if in || cur.Len() > 0 {
		t.Fatalf("%s: a ```sh block or a continued line does not end", path)
	}
	return out
}

// running says whether d has not exited yet.
func running(d *daemon) bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// exampleRule says what TestReadmeExamples does with the commands that
// start with prefix (and contain every string of has).
type exampleRule struct {
	prefix string
	has    []string
	action string // "run", "daemon" (in the background, as in a second terminal) or "skip"
	why    string // for skip: why it does not run here, and what tests it instead
}

var exampleRules = []exampleRule{
	{prefix: "make ", action: "skip", why: "the project's own commands; this test is part of make test, and its TestMain builds the binary"},
	{prefix: "cd testplans", action: "skip", why: "the Testground plans: make plans runs them"},
	{prefix: "go run ./cmd/tgrun", action: "skip", why: "the Testground plans: make plans runs them"},
	{prefix: "p2pmsg recv", has: []string{"--jxta"}, action: "skip", why: "waits for JXSE peers: TestJXSESendRecv and TestJXSESockets run it with live JXSE"},
	{prefix: "p2pmsg send", has: []string{"tcp://10.0.0.5"}, action: "skip", why: "needs a JXSE peer: TestJXSESendRecv and TestJXSESockets run it with live JXSE"},
	{prefix: "p2pmsg bridge", action: "skip", why: "needs JXSE and libp2p peers: TestJXSEBridge runs it with live JXSE"},
	{prefix: "p2pmsg lab amtt", action: "skip", why: "a minute and more of measurement: TestLabAMTT runs it small"},
	{prefix: "p2pmsg lab grid", action: "skip", why: "minutes of measurement: TestLabGrid runs it small"},
	{prefix: "p2pmsg lab rtt", action: "skip", why: "minutes of measurement: TestLabRTTJSON runs it small"},
	{prefix: "p2pmsg lab rate", action: "skip", why: "minutes of measurement: TestLabRateJSON runs it small"},
	{prefix: "p2pmsg lab swarm", action: "skip", why: "many peers for seconds to minutes: make test runs lab swarm --peers 20 --check, TestLabSwarmJSON a small one"},
	{prefix: "p2pmsg lab codecs", has: []string{"--corpus all"}, action: "skip", why: "half a minute over the 3.5 MB DataSet result (more under -race); lab codecs runs here on the README's documents, and TestCodecListAndLabCodecs"},
	{prefix: "p2pmsg recv", action: "daemon"},
	{prefix: "p2pmsg ", action: "run"},
	{prefix: "echo ", has: []string{"| p2pmsg "}, action: "run"},
	{prefix: "cmp ", action: "run"},
}

func ruleFor(cmd string) (exampleRule, bool) {
	for _, r := range exampleRules {
		if !strings.HasPrefix(cmd, r.prefix) {
			continue
		}
		ok := true
		for _, h := range r.has {
			ok = ok && strings.Contains(cmd, h)
		}
		if ok {
			return r, true
		}
	}
	return exampleRule{}, false
}

// placeholderPeer is how the examples write the peer ID recv prints.
const placeholderPeer = "/p2p/12D3KooW…"

// TestReadmeExamples runs the shell examples of README.md and docs/*.md
// as a user would, in order, in one scratch directory with the binary on
// the PATH: the README's quick start first writes the documents with
// `lab docs` and moves into them. recv runs in the background, as in a
// second terminal, on a free port rather than the example's; the address
// it announces replaces the example's placeholder in later commands, and
// a recv started where one still runs interrupts that one first (the
// README's Ctrl-C). Every command must exit 0, so the README's cmp lines
// check the round trips byte for byte. A command no rule covers fails the
// test: run it, or say why it cannot run here.
func TestReadmeExamples(t *testing.T) {
	root := filepath.Join("..", "..")
	files := []string{filepath.Join(root, "README.md")}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, docs...)

	base := t.TempDir()
	bin := filepath.Join(base, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(binary_, filepath.Join(bin, "p2pmsg")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"XDG_CONFIG_HOME="+filepath.Join(base, "config"), "HOME="+base)
	ex := &exampleRun{t: t, dir: base, env: env, pwdFile: filepath.Join(base, ".pwd"),
		peers: map[string]string{}, daemons: map[string]*daemon{}}

	ran := 0
	for _, f := range files {
		for _, e := range shellExamples(t, f) {
			r, ok := ruleFor(e.cmd)
			if !ok {
				t.Errorf("%s: no rule for %q: run it in TestReadmeExamples, or say why it cannot run here", e.where, e.cmd)
				continue
			}
			switch r.action {
			case "skip":
				t.Logf("%s: skipped (%s): %s", e.where, r.why, e.cmd)
			case "daemon":
				ex.daemon(e)
				ran++
			case "run":
				ex.run(e)
				ran++
			}
		}
	}
	if ran < 10 {
		t.Fatalf("ran %d examples: the README's quick start is not where the test looks", ran)
	}
	for _, d := range ex.daemons {
		if running(d) {
			d.cmd.Process.Signal(syscall.SIGINT)
			d.wait(t)
		}
	}
}

// exampleRun is the state of TestReadmeExamples between commands.
type exampleRun struct {
	t       *testing.T
	dir     string // the working directory, which a `cd` in an example changes
	env     []string
	pwdFile string
	peers   map[string]string  // the example's peer address -> the daemon's
	daemons map[string]*daemon // by the example's listen address
	once    []*daemon          // recv --socket daemons, which exit after one stream
}

// resolve replaces the example's peer addresses with the running
// daemons'.
func (x *exampleRun) resolve(e example) string {
	cmd := e.cmd
	for from, to := range x.peers {
		cmd = strings.ReplaceAll(cmd, from, to)
	}
	if strings.Contains(cmd, placeholderPeer) {
		x.t.Fatalf("%s: no recv started for the peer in %q", e.where, e.cmd)
	}
	return cmd
}

func (x *exampleRun) run(e example) {
	t := x.t
	script := x.resolve(e) + "\nst=$?; pwd > " + x.pwdFile + "; exit $st"
	c := exec.Command("sh", "-c", script)
	c.Dir, c.Env = x.dir, x.env
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	if err != nil {
		t.Fatalf("%s: %s: %v\nstdout %q\nstderr %s", e.where, e.cmd, err, stdout.Bytes(), stderr.Bytes())
	}
	t.Logf("%s: ran: %s", e.where, e.cmd)
	if pwd, err := os.ReadFile(x.pwdFile); err == nil {
		x.dir = strings.TrimSpace(string(pwd))
	}
	// A socket recv ends with the stream a send --socket sent it.
	if strings.HasPrefix(e.cmd, "p2pmsg send") && strings.Contains(e.cmd, "--socket") {
		for _, d := range x.once {
			if running(d) {
				if code := d.wait(t); code != 0 {
					t.Fatalf("%s: recv --socket exit %d: %q", e.where, code, d.stderr)
				}
			}
		}
		x.once = nil
	}
}

// daemon starts a recv example in the background on a free port and
// records the address it announces for the example's placeholder.
func (x *exampleRun) daemon(e example) {
	t := x.t
	f := strings.Fields(e.cmd)
	listen := ""
	for i, a := range f {
		if a == "--listen" && i+1 < len(f) {
			listen = f[i+1]
		}
	}
	if !strings.HasPrefix(listen, "/ip4/127.0.0.1/tcp/") {
		t.Fatalf("%s: a recv example should listen on /ip4/127.0.0.1/tcp/PORT: %q", e.where, e.cmd)
	}
	if old := x.daemons[listen]; old != nil && running(old) {
		old.cmd.Process.Signal(syscall.SIGINT) // the README's Ctrl-C
		old.wait(t)
	}
	cmd := strings.Replace(e.cmd, listen, "/ip4/127.0.0.1/tcp/0", 1)
	d := startScript(t, x.dir, x.env, "exec "+cmd)
	x.daemons[listen] = d
	x.peers[listen+placeholderPeer] = d.addrs[0]
	if strings.Contains(e.cmd, "--socket") {
		x.once = append(x.once, d)
	}
	t.Logf("%s: started: %s (at %s)", e.where, e.cmd, d.addrs[0])
}

// startScript is start (peer_test.go) for a shell script run in dir.
func startScript(t *testing.T, dir string, env []string, script string) *daemon {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	return startCmd(t, cmd, nil, script)
}
