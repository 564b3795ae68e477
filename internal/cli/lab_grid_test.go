package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/pkg/encoding/adaptive"
)

func TestLabGrid(t *testing.T) {
	out := t.TempDir()
	// An earlier run's link-change report, which this run (--switch=false)
	// does not make: left there, it would read as this run's.
	if err := os.WriteFile(filepath.Join(out, "switch.md"), []byte("# Link change lan → dsl\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, nil, "lab", "grid", "--profile", "loopback", "--docs", "employees-1,random-4K", "--choices", "identity,s2:1",
		"--trials", "3", "--warmup", "1", "--budget", "0", "--switch=false", "--json", "--out", out)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(r.stdout)), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d JSON lines, want 2 documents × (2 choices + auto): %s", len(lines), r.stdout)
	}
	for _, l := range lines {
		var v struct {
			Choice string          `json:"choice"`
			AMTT   int64           `json:"amtt_ns"`
			Trials int             `json:"trials"`
			Seed   uint64          `json:"seed"`
			Link   json.RawMessage `json:"link"`
		}
		// --budget 0: --trials rounds, however short they are; each row
		// names its seed and its link (loopback's: unshaped).
		if err := json.Unmarshal([]byte(l), &v); err != nil || v.Choice == "" || v.AMTT <= 0 || v.Trials != 3 ||
			v.Seed != 1 || !bytes.Contains(v.Link, []byte(`"up":{"bandwidth_Bps":0`)) {
			t.Fatalf("line %q: %v", l, err)
		}
	}
	for _, f := range []string{"grid.jsonl", "grid.md", "grid.svg"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "switch.md")); err == nil {
		t.Errorf("--switch=false left an earlier run's switch.md in --out")
	}
	checkRunFile(t, out, "p2pmsg", "lab", "grid", "--profile=loopback", "--docs=employees-1,random-4K", "--choices=identity,s2:1",
		"--trials=3", "--warmup=1", "--budget=0s", "--switch=false", "--json=true", "--out="+out)
	// Reports of an earlier run carry its run.json, not this command's,
	// and its switch.md; without them beside the run's results, older
	// ones in --out go.
	again := t.TempDir()
	if err := os.WriteFile(filepath.Join(again, "switch.md"), []byte("# Link change lan → dsl\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, nil, "lab", "grid", "--from", filepath.Join(out, "grid.jsonl"), "--out", again); r.code != 0 {
		t.Fatalf("--from: exit %d: %s", r.code, r.stderr)
	}
	if a, b := readFile(t, filepath.Join(out, "run.json")), readFile(t, filepath.Join(again, "run.json")); !bytes.Equal(a, b) {
		t.Errorf("--from --out wrote run.json\n%s\nnot the earlier run's\n%s", b, a)
	}
	bare := t.TempDir()
	if err := os.WriteFile(filepath.Join(bare, "grid.jsonl"), readFile(t, filepath.Join(out, "grid.jsonl")), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, nil, "lab", "grid", "--from", filepath.Join(bare, "grid.jsonl"), "--out", again); r.code != 0 {
		t.Fatalf("--from: exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(again, "run.json")); err == nil {
		t.Errorf("--from reports with no run.json left another run's in --out")
	}
	if _, err := os.Stat(filepath.Join(again, "switch.md")); err == nil {
		t.Errorf("--from reports of a run without switch.md left another run's in --out")
	}
	// One made by a run beside its results goes with them.
	if err := os.WriteFile(filepath.Join(bare, "switch.md"), []byte("# Link change cable → t1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, nil, "lab", "grid", "--from", filepath.Join(bare, "grid.jsonl"), "--out", again); r.code != 0 {
		t.Fatalf("--from: exit %d: %s", r.code, r.stderr)
	}
	if b := readFile(t, filepath.Join(again, "switch.md")); !bytes.Contains(b, []byte("cable")) {
		t.Errorf("--from --out: switch.md %q, want the earlier run's", b)
	}
	if r := run(t, nil, "lab", "grid", "--from", filepath.Join(out, "none.jsonl")); r.code != 1 || !strings.Contains(string(r.stderr), "--from: open ") {
		t.Errorf("--from a missing file: exit %d, %q; want 1, naming --from", r.code, r.stderr)
	}
	if r := run(t, nil, "lab", "grid", "--trials", "1"); r.code != 2 {
		t.Fatalf("--trials 1: exit %d, want 2", r.code)
	}
	if r := run(t, nil, "lab", "grid", "--budget", "-1s"); r.code != 2 {
		t.Fatalf("--budget -1s: exit %d, want 2", r.code)
	}
	if r := run(t, nil, "lab", "grid", "--profile", "moon"); r.code != 2 {
		t.Fatalf("unknown profile: exit %d, want 2", r.code)
	}
}

// send --encode auto to a recv, twice: the document arrives intact, and
// the models are kept in the configuration directory between runs.
func TestSendEncodeAuto(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	cfg, got := t.TempDir(), t.TempDir()
	// Without --count: recv exiting after the last message could race the
	// second send's final flush. It is killed at the end of the test.
	recv := start(t, nil, "recv", "--pipe", a, "--listen", loopback, "--out", got)
	doc := bytes.Repeat([]byte("<order><id>10248</id><city>Reims</city><freight>32.38</freight></order>"), 700)
	docFile := writeFile(t, "doc.xml", doc)
	for range 2 {
		cmd := exec.Command(binary_, "send", "--pipe", a, "--peer", recv.addrs[0], "--elem", "doc=@"+docFile,
			"--mime", "text/xml", "--encode", "auto")
		cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+cfg)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("send: %v: %s", err, out)
		}
		// recv serves pathinfo: the sender measures the path and gets
		// the receiver's decode profile without a warning.
		if len(out) != 0 {
			t.Fatalf("send warned: %s", out)
		}
		if _, err := adaptive.Load(filepath.Join(cfg, "p2pmsg", "encoding-models.bin")); err != nil {
			t.Fatalf("models file: %v", err)
		}
	}
	// Both sends flushed: recv has both messages; wait for it to write them.
	for _, f := range []string{"000001-00-doc", "000002-00-doc"} {
		var b []byte
		var err error
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if b, err = os.ReadFile(filepath.Join(got, f)); err == nil && len(b) == len(doc) {
				break
			}
		}
		if !bytes.Equal(b, doc) {
			t.Fatalf("%s: %v, %d bytes, want the document", f, err, len(b))
		}
	}
	m, _ := adaptive.Load(filepath.Join(cfg, "p2pmsg", "encoding-models.bin"))
	if len(m.Specs()) == 0 {
		t.Fatal("the models file holds nothing")
	}
}

// recv measures its codecs for the decode profile it serves when a sender
// first asks for it, not at start (measuring builds every codec's encoder:
// 50 MB allocated): a first run no sender asks saves no profile; the next,
// asked by send --encode auto, saves one covering its codecs.
func TestRecvMeasuresDecodesWhenAsked(t *testing.T) {
	a := newPipeAdv(t, "unicast")
	cfg := t.TempDir()
	recv := func(args ...string) *daemon {
		cmd := exec.Command(binary_, append([]string{"recv", "--pipe", a, "--listen", loopback}, args...)...)
		cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+cfg)
		return startCmd(t, cmd, nil, "recv")
	}
	profile := func() []string {
		m, err := adaptive.Load(filepath.Join(cfg, "p2pmsg", "encoding-models.bin"))
		if err != nil {
			t.Fatal(err)
		}
		return m.Profile().Codecs()
	}
	idle := recv()
	if err := idle.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := idle.wait(t); code != 0 {
		t.Fatalf("recv interrupted: exit %d: %s", code, idle.stderr)
	}
	if got := profile(); len(got) != 0 {
		t.Fatalf("a recv no sender asked measured %v", got)
	}

	asked := recv("--count", "1")
	cmd := exec.Command(binary_, "send", "--pipe", a, "--peer", asked.addrs[0], "--elem", "doc=<a>b</a>", "--mime", "text/xml", "--encode", "auto")
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil || len(out) != 0 {
		t.Fatalf("send: %v: %s", err, out)
	}
	if code := asked.wait(t); code != 0 {
		t.Fatalf("recv: exit %d: %s", code, asked.stderr)
	}
	if got, want := profile(), []string{"deflate", "gzip", "identity", "s2", "xml", "zstd"}; !slices.Equal(got, want) {
		t.Fatalf("recv asked for its profile saved one of %v, want %v", got, want)
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
