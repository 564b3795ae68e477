package cli_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/wire"
)

var binary_ string

// testCommit is the commit the test binary says it was built from.
const testCommit = "cli-test-commit"

// TestMain builds the real binary once; the tests run it as a user would.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "p2pmsg-cli-")
	if err != nil {
		panic(err)
	}
	binary_ = filepath.Join(dir, "p2pmsg")
	// The commit a build records in --out's run.json, as the Makefile
	// sets it (GOFLAGS=-buildvcs=false here stamps none).
	args := []string{"build", "-o", binary_, "-ldflags", "-X github.com/p2pmsg/p2pmsg/internal/provenance.BuildCommit=" + testCommit}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, "github.com/p2pmsg/p2pmsg/cmd/p2pmsg")...).CombinedOutput()
	if err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}), goleak.IgnoreAnyFunction("github.com/ipfs/go-log/v2/writer.(*MirrorWriter).logRoutine"))
}

// rssBudgetKiB is how much peak memory a child may report: 200 MiB,
// beyond this test process's own peak, because Linux starts a child's
// high-water mark at its parent's (the exec'd process inherits the
// vforked one's), so other tests' memory shows up in it.
func rssBudgetKiB() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Maxrss + 200<<10
}

type result struct {
	stdout, stderr []byte
	code           int
	maxRSSKiB      int64
}

func run(t *testing.T, stdin []byte, args ...string) result {
	t.Helper()
	return runEnv(t, nil, stdin, args...)
}

// runEnv is run with env added to the environment.
func runEnv(t *testing.T, env []string, stdin []byte, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary_, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.Bytes(), stderr: stderr.Bytes()}
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("running p2pmsg: %v", err)
		}
	}
	r.code = cmd.ProcessState.ExitCode()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSSKiB = ru.Maxrss
	}
	return r
}

// failsCleanly checks the error contract: non-zero exit, one line on
// stderr, no panic, nothing on stdout.
func failsCleanly(t *testing.T, r result) {
	t.Helper()
	if r.code == 0 {
		t.Fatalf("exit 0, want failure; stdout %q", r.stdout)
	}
	if lines := strings.Count(strings.TrimRight(string(r.stderr), "\n"), "\n"); lines != 0 || len(r.stderr) == 0 {
		t.Fatalf("stderr is not one line: %q", r.stderr)
	}
	if bytes.Contains(r.stderr, []byte("panic")) || bytes.Contains(r.stderr, []byte("goroutine")) {
		t.Fatalf("panicked: %s", r.stderr)
	}
	if len(r.stdout) != 0 {
		t.Fatalf("failed but wrote %d bytes to stdout", len(r.stdout))
	}
}

func TestHelpEverywhere(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"msg", "--help"}, {"msg", "encode", "--help"}, {"msg", "decode", "--help"},
		{"adv", "--help"}, {"adv", "new", "--help"}, {"adv", "show", "--help"}, {"lab", "rtt", "--help"},
		{"lab", "--help"}, {"lab"}, {"codec", "-h"}, {"help"}, {"help", "lab"}, {"help", "codec", "list"},
		{"completion"}, {"completion", "bash", "--help"},
	} {
		r := run(t, nil, args...)
		if r.code != 0 || !bytes.Contains(r.stdout, []byte("Usage:")) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"nonsense"}, {"sned"}, {"msg", "encode", "--bogus"}, {"msg", "decode", "extra"},
		{"msg", "bogus"}, {"lab", "bogus"}, {"adv", "new"}, {"adv", "show", "a", "b"}, {"send", "--count", "x"},
		// an unknown subcommand of a group with --help: not the group's
		// help and exit 0, as cobra does by itself
		{"lab", "layers", "--help"}, {"codec", "bogus", "-h"},
		// nor with help before it: before, the group's help (or the
		// root's usage for an unknown command) and exit 0
		{"help", "lab", "layers"}, {"help", "codec", "bogus"}, {"help", "nonsense"}, {"help", "lab", "rtt", "extra"},
		// cobra's completion command, checked as the others: before, its
		// help and exit 0, and exit 1 for an argument of completion bash
		{"completion", "bogus"}, {"completion", "bogus", "-h"}, {"completion", "bash", "extra"},
	} {
		r := run(t, nil, args...)
		failsCleanly(t, r)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2", args, r.code)
		}
	}
}

// A usage error's line says what is wrong in the command's own terms:
// the missing or extra argument, the flag left out, the names a list
// takes, as lab rtt lists its layers.
func TestUsageErrorsSayWhat(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // the line after "p2pmsg: "; before, in the comment
	}{
		{[]string{"adv", "show"}, "missing FILE: the advertisement to show (- for stdin)"},     // accepts 1 arg(s), received 0
		{[]string{"adv", "show", "a", "b"}, "2 files given: adv show takes one"},               // accepts 1 arg(s), received 2
		{[]string{"codec", "train", "x.xml"}, "--codec is required: xml or zstd"},              // --codec "": want xml or zstd
		{[]string{"lab", "rate", "--layer", "bogus"}, `unknown layer: "bogus" (have stream, `}, // (rate layers: [stream stream-bufio …])
		// a value a flag cannot parse: before, pflag's 'invalid argument
		// "x" for "--count" flag: strconv.ParseInt: parsing "x": invalid syntax'
		{[]string{"send", "--count", "x"}, `--count "x": want an integer`},
		{[]string{"send", "--count", "99999999999999999999"}, `--count "99999999999999999999": value out of range`},
		{[]string{"lab", "grid", "--max-message", "5"}, `--max-message "5": want a duration with its unit`},
		{[]string{"lab", "amtt", "--json=maybe"}, `--json "maybe": want true or false`},
		{[]string{"codec", "train", "--id", "-1"}, `--id "-1": want an integer of 0 or more`},
		// the packages a check sits in are not named: before, "swarm:
		// configuration: a swarm of 1 peers…", "lab: invalid grid
		// configuration: linkemu: unknown profile…", "lab: unknown layer…"
		{[]string{"lab", "swarm", "--peers", "1"}, `invalid configuration: a swarm of 1 peers: use 4 or more`},
		{[]string{"lab", "grid", "--profile", "nosuch"}, `invalid grid configuration: unknown profile "nosuch" (have cable, `},
		{[]string{"lab", "amtt", "--profile", "nosuch"}, `unknown profile "nosuch" (have cable, `},
		// refused before it runs: before, exit 1 once the first rig
		// opened ("lab: rate endpoint, 1 senders to 1 peers: lab:
		// unknown transport…")
		{[]string{"lab", "rate", "--transport", "udp"}, `invalid rate configuration: unknown transport "udp" (want tcp or quic)`},
		// NaN passed the range checks: lab rate measured latencies
		// "p50 0s p99 0s", lab swarm ran with a NaN churn
		{[]string{"lab", "rate", "--load", "NaN"}, `--load "NaN": want a finite number`},
		{[]string{"lab", "swarm", "--churn", "nan"}, `--churn "NaN": want a finite number`},
		// an empty list ran the defaults
		{[]string{"lab", "grid", "--docs", ","}, `--docs "," names nothing`},
		{[]string{"lab", "swarm", "--case", ","}, `--case "," names nothing`},
		// before, the swarm started building a million peers
		{[]string{"lab", "swarm", "--peers", "1000000"}, `invalid configuration: a swarm of 1000000 peers in one process holds up to`},
	} {
		r := run(t, nil, c.args...)
		failsCleanly(t, r)
		if got := string(r.stderr); r.code != 2 || !strings.HasPrefix(got, "p2pmsg: "+c.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 and %q", c.args, r.code, got, "p2pmsg: "+c.want)
		}
	}
}

// An address that cannot be listened at or dialled is a usage error
// before anything starts, quoted once. Before, recv --jxta and send
// --peer with port 99999 failed with exit 1 ("jxtatcp: listen tcp:
// address 99999: invalid port"; "no peer has the pipe bound … invalid
// port"), bridge --jxse-peer took any tcp:// string, and a multiaddr's
// error quoted it twice ("… failed to parse multiaddr "/bogus/x": …").
func TestAddressesChecked(t *testing.T) {
	a := run(t, nil, "adv", "new", "--type", "unicast", "--name", "addr")
	if a.code != 0 {
		t.Fatalf("adv new: %s", a.stderr)
	}
	advFile := filepath.Join(t.TempDir(), "a.xml")
	if err := os.WriteFile(advFile, a.stdout, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"recv", "--pipe", advFile, "--jxta", "tcp://127.0.0.1:99999"}, `--jxta "tcp://127.0.0.1:99999": port "99999": want 0 to 65535`},
		{[]string{"recv", "--pipe", advFile, "--jxta", "tcp://127.0.0.1"}, `--jxta "tcp://127.0.0.1": want tcp://ADDR:PORT`},
		{[]string{"recv", "--pipe", advFile, "--jxta", "tcp://127.0.0.1:9/svc"}, `--jxta "tcp://127.0.0.1:9/svc": want tcp://ADDR:PORT`},
		{[]string{"send", "--pipe", advFile, "--elem", "a=b", "--peer", "tcp://127.0.0.1:99999"}, `--peer "tcp://127.0.0.1:99999": port "99999": want 1 to 65535`},
		{[]string{"send", "--pipe", advFile, "--elem", "a=b", "--peer", "tcp://127.0.0.1:0"}, `--peer "tcp://127.0.0.1:0": port "0": want 1 to 65535`},
		{[]string{"send", "--pipe", advFile, "--elem", "a=b", "--peer", "tcp://:9701"}, `--peer "tcp://:9701": want tcp://HOST:PORT with a host`},
		{[]string{"bridge", "--pipe", advFile, "--jxta", "tcp://127.0.0.1:0", "--jxse-peer", "tcp://127.0.0.1:70000"}, `--jxse-peer "tcp://127.0.0.1:70000": port "70000": want 1 to 65535`},
		{[]string{"send", "--pipe", advFile, "--elem", "a=b", "--peer", "/bogus/x"}, `--peer "/bogus/x": want a multiaddr ending in /p2p/<peer id>: unknown protocol bogus` + "\n"},
		{[]string{"recv", "--pipe", advFile, "--listen", "/bogus/x"}, `--listen "/bogus/x": want a multiaddr such as /ip4/127.0.0.1/tcp/9701: unknown protocol bogus` + "\n"},
	} {
		r := run(t, nil, c.args...)
		failsCleanly(t, r)
		if got := string(r.stderr); r.code != 2 || !strings.HasPrefix(got, "p2pmsg: "+c.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 and %q", c.args, r.code, got, "p2pmsg: "+c.want)
		}
	}
}

func TestMsgEncodeDecode(t *testing.T) {
	in := `{"elements":[` +
		`{"namespace":"","name":"greeting","mime":"text/plain;charset=UTF-8","data":"` + base64.StdEncoding.EncodeToString([]byte("héllo")) + `"},` +
		`{"namespace":"p2pmsg","name":"blob","mime":"application/octet-stream","data":"AQID"},` +
		`{"namespace":"jxta","name":"empty","mime":"Text/XML; Charset=\"utf-8\"","data":""}]}`
	enc := run(t, []byte(in), "msg", "encode")
	if enc.code != 0 {
		t.Fatalf("encode: %s", enc.stderr)
	}
	m, err := wire.Unmarshal(enc.stdout)
	if err != nil {
		t.Fatalf("encode wrote an undecodable message: %v", err)
	}
	want := message.New(
		message.Text("", "greeting", "héllo"),
		message.Bytes("p2pmsg", "blob", []byte{1, 2, 3}),
		message.Element{Namespace: "jxta", Name: "empty", MIME: "text/xml;charset=utf-8", Data: []byte{}},
	)
	if !m.Equal(want) {
		t.Fatalf("encoded message differs")
	}
	dec := run(t, enc.stdout, "msg", "decode")
	if dec.code != 0 {
		t.Fatalf("decode: %s", dec.stderr)
	}
	const wantJSON = `{"elements":[{"namespace":"","name":"greeting","mime":"text/plain;charset=UTF-8","data":"aMOpbGxv"},` +
		`{"namespace":"p2pmsg","name":"blob","mime":"application/octet-stream","data":"AQID"},` +
		`{"namespace":"jxta","name":"empty","mime":"text/xml;charset=utf-8","data":""}]}` + "\n"
	if string(dec.stdout) != wantJSON {
		t.Fatalf("decode printed\n%s\nwant\n%s", dec.stdout, wantJSON)
	}
	// And encode again: the canonical form is a fixed point.
	again := run(t, dec.stdout, "msg", "encode")
	if !bytes.Equal(again.stdout, enc.stdout) {
		t.Fatal("decode | encode does not reproduce the bytes")
	}
}

// TestMsgHugeMaxSize: a --max-size near int64's largest reads the input
// as any other. Before, msg encode's bound for its JSON (4/3 of it)
// overflowed to a negative one ('JSON input larger than
// -6148914691235468632 bytes' for int64's largest --max-size), and
// reading one byte more than int64's largest read nothing.
func TestMsgHugeMaxSize(t *testing.T) {
	in := `{"elements":[{"namespace":"","name":"hi","mime":"text/plain","data":"aGk="}]}`
	for _, max := range []string{"7000000000000000000", "9223372036854775807"} {
		enc := run(t, []byte(in), "msg", "encode", "--max-size", max)
		if enc.code != 0 {
			t.Fatalf("encode --max-size %s: %s", max, enc.stderr)
		}
		if _, err := wire.Unmarshal(enc.stdout); err != nil {
			t.Fatalf("encode --max-size %s wrote an undecodable message: %v", max, err)
		}
	}
}

func TestMsgEncodeBadJSON(t *testing.T) {
	for name, in := range map[string]string{
		"not json":      `nope`,
		"unknown field": `{"elements":[],"extra":1}`,
		"bad base64":    `{"elements":[{"name":"a","data":"!!"}]}`,
		"bad mime":      `{"elements":[{"name":"a","mime":"nonsense","data":""}]}`,
		"trailing":      `{"elements":[]} {}`,
		"name too long": `{"elements":[{"name":"` + strings.Repeat("n", 40000) + `","data":""}]}`,
		"too many ns":   manyNamespacesJSON(300),
		"empty input":   ``,
	} {
		t.Run(name, func(t *testing.T) { failsCleanly(t, run(t, []byte(in), "msg", "encode")) })
	}
}

func manyNamespacesJSON(n int) string {
	var j struct {
		Elements []map[string]string `json:"elements"`
	}
	for i := 0; i < n; i++ {
		j.Elements = append(j.Elements, map[string]string{"namespace": "ns" + strings.Repeat("x", i), "name": "a", "data": ""})
	}
	b, _ := json.Marshal(j)
	return string(b)
}

// TestMsgDecodeHostile feeds truncated, mutated and lying inputs: each must
// fail with one line and little memory.
func TestMsgDecodeHostile(t *testing.T) {
	valid, err := wire.Marshal(message.New(message.Text("ns", "name", "value"), message.Bytes("", "b", []byte{1, 2, 3})))
	if err != nil {
		t.Fatal(err)
	}
	lying := []byte("jxmg\x00\x00\x00\x00\x01jxel\x00\x00\x00\x01a")
	lying = binary.BigEndian.AppendUint32(lying, 60<<20)
	lying = append(lying, "only a few bytes"...)
	cases := map[string][]byte{
		"empty":          nil,
		"garbage":        []byte("definitely not a message"),
		"lying length":   lying,
		"trailing bytes": append(bytes.Clone(valid), 0),
	}
	for _, cut := range []int{1, 4, 5, 8, 12, len(valid) - 1} {
		cases["truncated at "+string(rune('0'+cut%10))+"/"+strings.Repeat("i", cut/10)] = valid[:cut]
	}
	for i, pos := range []int{0, 4, 7, 9, 13, 14, 16} {
		c := bytes.Clone(valid)
		c[pos] ^= 0xff
		cases["mutated "+string(rune('a'+i))] = c
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			r := run(t, in, "msg", "decode")
			failsCleanly(t, r)
			if r.maxRSSKiB > rssBudgetKiB() { // generous for -race builds
				t.Fatalf("used %d KiB decoding %d bytes", r.maxRSSKiB, len(in))
			}
		})
	}
	// A size limit from the command line applies before reading further.
	failsCleanly(t, run(t, valid, "msg", "decode", "--max-size", "10"))
}

// jsonRows parses out as n lines of JSON objects, each with every key.
func jsonRows(t *testing.T, out []byte, n int, keys ...string) []map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != n {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), n, out)
	}
	var rows []map[string]any
	for _, l := range lines {
		var row map[string]any
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		for _, k := range keys {
			if _, ok := row[k]; !ok {
				t.Errorf("row %q lacks %q", l, k)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func TestLabRateJSON(t *testing.T) {
	r := run(t, nil, "lab", "rate", "--layer", "stream,endpoint", "--sizes", "16", "--shapes", "1x1", "--messages", "1000", "--json")
	if r.code != 0 {
		t.Fatalf("lab rate: %s", r.stderr)
	}
	jsonRows(t, r.stdout, 2, "layer", "transport", "size", "senders", "peers", "messages", "msgs_per_s", "bytes_per_s", "p50_ns", "p99_ns")
	failsCleanly(t, run(t, nil, "lab", "rate", "--layer", "carrier-pigeon"))
	failsCleanly(t, run(t, nil, "lab", "rate", "--sizes", "4"))
	failsCleanly(t, run(t, nil, "lab", "rate", "--shapes", "8by1"))
}

func TestLabRTTJSON(t *testing.T) {
	r := run(t, nil, "lab", "rtt", "--layer", "tcp,stream", "--sizes", "1,1K", "--warmup", "5", "--runs", "1", "--pairs", "3", "--json")
	if r.code != 0 {
		t.Fatalf("lab rtt: %s", r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(r.stdout)), "\n")
	if len(lines) != 4 { // two layers × two sizes
		t.Fatalf("%d lines, want 4:\n%s", len(lines), r.stdout)
	}
	for _, l := range lines {
		var row map[string]any
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		// A row names the schedule it was measured with (no baseline:
		// none was given).
		for _, k := range []string{"layer", "transport", "size", "rtt_ns", "latency_ns", "bandwidth_Bps", "wire_bytes", "warmup", "runs", "pairs"} {
			if _, ok := row[k]; !ok {
				t.Errorf("row %q lacks %q", l, k)
			}
		}
		if len(row) != 10 || row["warmup"] != 5.0 || row["runs"] != 1.0 || row["pairs"] != 3.0 {
			t.Errorf("row %q: extra fields, or not the schedule run", l)
		}
	}
	failsCleanly(t, run(t, nil, "lab", "rtt", "--layer", "carrier-pigeon"))
	failsCleanly(t, run(t, nil, "lab", "rtt", "--sizes", "0"))
	failsCleanly(t, run(t, nil, "lab", "rtt", "--layer", "tcp", "--baseline", "stream"))
	failsCleanly(t, run(t, nil, "lab", "rtt", "--layer", "pipe,endpoint,pipe"))

	// With a baseline every row carries its ratio, and names the layer
	// it is over; the baseline's own ratio is 1.
	r = run(t, nil, "lab", "rtt", "--layer", "tcp,stream", "--baseline", "tcp", "--sizes", "1", "--warmup", "5", "--runs", "3", "--pairs", "3", "--json")
	if r.code != 0 {
		t.Fatalf("lab rtt --baseline: %s", r.stderr)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(r.stdout)), "\n") {
		var row struct {
			Layer    string  `json:"layer"`
			Ratio    float64 `json:"ratio_to_baseline"`
			Baseline string  `json:"baseline"`
		}
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if row.Ratio <= 0 || row.Layer == "tcp" && row.Ratio != 1 || row.Baseline != "tcp" {
			t.Errorf("row %q: ratio %g", l, row.Ratio)
		}
	}
}

// lab rtt --transport quic runs the libp2p layers on QUIC; the raw TCP
// layer stays on TCP and its rows say so (before, every row read
// "transport": "quic", raw TCP's too).
func TestLabRTTTransportIsTheLayers(t *testing.T) {
	r := run(t, nil, "lab", "rtt", "--layer", "tcp,stream", "--transport", "quic", "--sizes", "1", "--warmup", "5", "--runs", "1", "--pairs", "3", "--json")
	if r.code != 0 {
		t.Fatalf("lab rtt: %s", r.stderr)
	}
	want := map[string]string{"tcp": "tcp", "stream": "quic"}
	for _, l := range strings.Split(strings.TrimSpace(string(r.stdout)), "\n") {
		var row struct{ Layer, Transport string }
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if row.Transport != want[row.Layer] {
			t.Errorf("layer %s: transport %q, want %q", row.Layer, row.Transport, want[row.Layer])
		}
		delete(want, row.Layer)
	}
	if len(want) != 0 {
		t.Errorf("no rows for %v: %s", want, r.stdout)
	}
}

func TestAdvNewShow(t *testing.T) {
	dir := t.TempDir()
	for _, typ := range []struct{ flag, want string }{{"unicast", "JxtaUnicast"}, {"secure", "JxtaUnicastSecure"}, {"propagate", "JxtaPropagate"}} {
		r := run(t, nil, "adv", "new", "--type", typ.flag, "--name", "chat é", "--desc", "a <b>")
		if r.code != 0 {
			t.Fatalf("adv new: %s", r.stderr)
		}
		path := filepath.Join(dir, typ.flag+".xml")
		if err := os.WriteFile(path, r.stdout, 0o644); err != nil {
			t.Fatal(err)
		}
		show := run(t, nil, "adv", "show", path)
		if show.code != 0 {
			t.Fatalf("adv show: %s", show.stderr)
		}
		var got map[string]string
		if err := json.Unmarshal(show.stdout, &got); err != nil {
			t.Fatal(err)
		}
		if got["type"] != typ.want || got["name"] != "chat é" || got["desc"] != "a <b>" || !strings.HasPrefix(got["id"], "urn:jxta:cbid-") || len(got) != 4 {
			t.Fatalf("adv show printed %v", got)
		}
	}
	const pid = "urn:jxta:cbid-59616261646162614E504720503250334104A45E43FD481DAA2D9BC13236A09504"
	r := run(t, nil, "adv", "new", "--type", "unicast", "--name", "n", "--id", pid)
	if !bytes.Contains(r.stdout, []byte("<Id>"+pid+"</Id>")) {
		t.Fatalf("--id ignored: %s", r.stdout)
	}
	stdin := run(t, r.stdout, "adv", "show", "-")
	if stdin.code != 0 {
		t.Fatalf("adv show -: %s", stdin.stderr)
	}
	for _, args := range [][]string{
		{"adv", "new", "--type", "multicast", "--name", "n"},
		{"adv", "new", "--type", "unicast"},
		{"adv", "new", "--type", "unicast", "--name", "n", "--id", "urn:jxta:jxta-NetGroup"},
		{"adv", "new", "--type", "unicast", "--name", "bad\x01"},
		{"adv", "new", "--type", "secure", "--name", "n", "--binder", "not-a-peer"},
		{"adv", "new", "--type", "propagate", "--name", "n", "--binder", "12D3KooWBVXX99f6arzRf2F5D5gTupvJmb9VNeSPeyJeAkSumagr"},
		{"adv", "show", filepath.Join(dir, "missing.xml")},
	} {
		failsCleanly(t, run(t, nil, args...))
	}
	// Allowed binders are written and shown.
	const binder = "12D3KooWBVXX99f6arzRf2F5D5gTupvJmb9VNeSPeyJeAkSumagr"
	r = run(t, nil, "adv", "new", "--type", "secure", "--name", "vault", "--binder", binder)
	if !bytes.Contains(r.stdout, []byte("<Binder>"+binder+"</Binder>")) {
		t.Fatalf("--binder: %s %s", r.stdout, r.stderr)
	}
	if show := run(t, r.stdout, "adv", "show", "-"); !bytes.Contains(show.stdout, []byte(`"binders":["`+binder+`"]`)) {
		t.Fatalf("adv show printed %s", show.stdout)
	}
}

// TestAdvShowHostile: truncated, mutated and hostile documents fail with
// one line and little memory.
func TestAdvShowHostile(t *testing.T) {
	good := run(t, nil, "adv", "new", "--type", "unicast", "--name", "n").stdout
	dir := t.TempDir()
	cases := map[string][]byte{
		"empty":      nil,
		"truncated":  good[:len(good)/2],
		"mutated":    bytes.Replace(good, []byte("<Type>"), []byte("<Typo>"), 1),
		"laughs":     []byte(`<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;&a;">]><jxta:PipeAdvertisement xmlns:jxta="http://jxta.org"><Name>&b;</Name></jxta:PipeAdvertisement>`),
		"deep":       []byte(strings.Repeat("<a>", 10000) + strings.Repeat("</a>", 10000)),
		"huge":       bytes.Repeat([]byte("x"), 10<<20),
		"wrong root": []byte(`<jxta:PeerAdvertisement xmlns:jxta="http://jxta.org"/>`),
		"binary":     {0, 1, 2, 0xff, '<', 0},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			os.WriteFile(path, in, 0o644)
			r := run(t, nil, "adv", "show", path)
			failsCleanly(t, r)
			if r.maxRSSKiB > rssBudgetKiB() {
				t.Fatalf("used %d KiB", r.maxRSSKiB)
			}
		})
	}
}

func TestCodecListAndLabCodecs(t *testing.T) {
	r := run(t, nil, "codec", "list")
	for _, c := range []string{"identity", "gzip", "deflate", "zstd", "s2", "xml", "seal"} {
		if !bytes.Contains(r.stdout, []byte(c+"\n")) {
			t.Errorf("codec list lacks %s: %q", c, r.stdout)
		}
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "doc.xml")
	os.WriteFile(f, bytes.Repeat([]byte("<a>hello</a>"), 500), 0o644)
	r = run(t, nil, "lab", "codecs", "--codecs", "gzip:6,zstd:3", "--files", f, "--json")
	if r.code != 0 {
		t.Fatalf("lab codecs: %s", r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(r.stdout)), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines:\n%s", len(lines), r.stdout)
	}
	for _, l := range lines {
		var row map[string]any
		if err := json.Unmarshal([]byte(l), &row); err != nil || len(row) != 6 || row["bytes_in"].(float64) != 6000 {
			t.Fatalf("row %q: %v", l, err)
		}
	}
	failsCleanly(t, run(t, nil, "lab", "codecs", "--codecs", "lzma"))
	failsCleanly(t, run(t, nil, "lab", "codecs", "--files", filepath.Join(dir, "missing")))
}

func TestLabSwarmJSON(t *testing.T) {
	dir := t.TempDir()
	r := run(t, nil, "lab", "swarm", "--peers", "6", "--case", "propagate,resolve", "--publishers", "2", "--rate", "40", "--duration", "1s", "--targets", "2", "--json", "--check", "--out", dir)
	if r.code != 0 {
		t.Fatalf("lab swarm: %s", r.stderr)
	}
	for _, row := range jsonRows(t, r.stdout, 2, "case", "peers", "expected", "delivered", "duplicates", "p50_ns", "p99_ns", "max_ns", "failures", "bytes_per_delivery", "rss_bytes_per_peer", "pss_bytes_per_peer") {
		if row["delivered"] != row["expected"] {
			t.Errorf("incomplete: %v", row)
		}
	}
	for _, f := range []string{"swarm.jsonl", "swarm.md", "swarm.svg"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || len(b) == 0 {
			t.Errorf("--out: %s: %v", f, err)
		}
	}
	// The seed drawn (none was given) is in the command line that repeats
	// the run.
	seed := regexp.MustCompile(`seed (\d+) \(drawn at random`).FindSubmatch(r.stderr)
	if seed == nil {
		t.Fatalf("no drawn seed on stderr: %s", r.stderr)
	}
	checkRunFile(t, dir, "p2pmsg", "lab", "swarm", "--peers=6", "--case=propagate,resolve", "--publishers=2", "--rate=40",
		"--duration=1s", "--targets=2", "--json=true", "--check=true", "--out="+dir, "--seed="+string(seed[1]))
	failsCleanly(t, run(t, nil, "lab", "swarm", "--case", "stampede"))
	failsCleanly(t, run(t, nil, "lab", "swarm", "--peers", "2"))
}

// lab swarm without --seed (or with --seed 0) draws one and says which on
// stderr, so that the run's picks can be made again (before, the drawn
// seed was printed nowhere: not on stderr, stdout, or in --out's files);
// a seed given is not announced as drawn.
func TestLabSwarmSaysDrawnSeed(t *testing.T) {
	args := []string{"lab", "swarm", "--peers", "4", "--case", "resolve", "--targets", "1"}
	r := run(t, nil, args...)
	if r.code != 0 {
		t.Fatalf("lab swarm: exit %d: %s", r.code, r.stderr)
	}
	m := regexp.MustCompile(`lab swarm: seed (\d+) \(drawn at random; --seed (\d+) makes the same picks\)`).FindSubmatch(r.stderr)
	if m == nil || string(m[1]) != string(m[2]) || string(m[1]) == "0" {
		t.Fatalf("no drawn seed on stderr: %s", r.stderr)
	}
	r = run(t, nil, append(args, "--seed", string(m[1]))...)
	if r.code != 0 {
		t.Fatalf("lab swarm --seed %s: exit %d: %s", m[1], r.code, r.stderr)
	}
	if bytes.Contains(r.stderr, []byte("drawn at random")) {
		t.Errorf("--seed %s given, yet announced as drawn: %s", m[1], r.stderr)
	}
}

// TestLabCPUProfile: --cpuprofile on any lab command writes a profile
// (gzip-compressed protobuf) covering the run, whether the run succeeds
// or fails (before, a failed run left the file empty); a command refused
// for its command line ran nothing and leaves no file (before, an empty
// one).
func TestLabCPUProfile(t *testing.T) {
	dir := t.TempDir()
	isProfile := func(what, prof string) {
		t.Helper()
		b, err := os.ReadFile(prof)
		if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Fatalf("%s: profile: %d bytes, %v", what, len(b), err)
		}
	}
	prof := filepath.Join(dir, "cpu.pprof")
	r := run(t, nil, "lab", "docs", "--out", dir, "--cpuprofile", prof)
	if r.code != 0 {
		t.Fatalf("lab docs --cpuprofile: %s", r.stderr)
	}
	isProfile("lab docs", prof)
	failsCleanly(t, run(t, nil, "lab", "docs", "--out", dir, "--cpuprofile", filepath.Join(dir, "no", "such", "dir", "cpu.pprof")))

	failed := filepath.Join(dir, "failed.pprof")
	r = run(t, nil, "lab", "codecs", "--files", filepath.Join(dir, "nosuch.xml"), "--cpuprofile", failed)
	failsCleanly(t, r)
	isProfile("lab codecs of a missing file", failed)

	refused := filepath.Join(dir, "refused.pprof")
	if r := run(t, nil, "lab", "swarm", "--peers", "1", "--cpuprofile", refused); r.code != 2 {
		t.Fatalf("lab swarm --peers 1: exit %d, want 2", r.code)
	}
	if _, err := os.Stat(refused); err == nil {
		t.Fatalf("lab swarm --peers 1 was refused, but left its --cpuprofile file")
	}
}

// TestHelpFlagTypes: every flag in every command's --help shows its
// value's type as one word (pflag takes a `quoted` part of a usage
// string for the type's name, which turned --model's into "p2pmsg codec
// train").
func TestHelpFlagTypes(t *testing.T) {
	cmds := [][]string{{"send"}, {"recv"}, {"id"}, {"bridge"}, {"adv", "new"}, {"adv", "show"},
		{"msg", "encode"}, {"msg", "decode"}, {"codec", "list"}, {"codec", "encode"}, {"codec", "decode"},
		{"codec", "query"}, {"codec", "train"}, {"lab", "codecs"}, {"lab", "amtt"}, {"lab", "grid"},
		{"lab", "rtt"}, {"lab", "rate"}, {"lab", "swarm"}, {"lab", "docs"}}
	for _, c := range cmds {
		r := run(t, nil, append(c, "--help")...)
		if r.code != 0 {
			t.Fatalf("%v --help: exit %d: %s", c, r.code, r.stderr)
		}
		_, flags, _ := strings.Cut(string(r.stdout), "\nFlags:\n")
		flags, _, _ = strings.Cut(flags, "\n\n")
		for _, line := range strings.Split(flags, "\n") {
			trimmed := strings.TrimSpace(line)
			if !strings.HasPrefix(trimmed, "-") {
				continue // a usage's continuation line
			}
			// "--name type   usage": what lies between the name and the
			// gap before the usage is the type, one word or none.
			head, _, _ := strings.Cut(trimmed, "   ")
			fields := strings.Fields(head)
			if len(fields) > 0 && strings.HasSuffix(fields[0], ",") { // "-h, --help"
				fields = fields[1:]
			}
			if len(fields) > 2 {
				t.Errorf("%v --help: flag line %q shows %q as its type", c, trimmed, strings.Join(fields[1:], " "))
			}
		}
	}
}
