package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/p2pmsg/p2pmsg/internal/testutil"
)

// runRefused runs a lab command that must be refused before it measures
// anything. Were the value taken for the flag's default instead, the
// command would run for minutes; it is stopped after a while, and the
// test says it ran.
func runRefused(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary_, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%v was not refused: it ran for a minute (stderr %q)", args, stderr.Bytes())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running p2pmsg: %v", err)
	}
	return result{stdout: stdout.Bytes(), stderr: stderr.Bytes(), code: cmd.ProcessState.ExitCode()}
}

// A lab flag given a value its help does not allow (zero where the
// command needs a positive count, rate or duration; a shape of no
// senders) is a wrong command line: exit 2 and one line naming the flag,
// not the flag's default taken silently and a run of minutes.
func TestLabRefusesZeroValues(t *testing.T) {
	for _, args := range [][]string{
		{"lab", "swarm", "--peers", "0"},
		{"lab", "swarm", "--publishers", "0"},
		{"lab", "swarm", "--rate", "0"},
		{"lab", "swarm", "--duration", "0s"},
		{"lab", "swarm", "--targets", "0"},
		{"lab", "swarm", "--size", "0"},
		{"lab", "swarm", "--degree", "0"},
		{"lab", "swarm", "--relay-fraction", "0"},
		{"lab", "swarm", "--relays", "0"},
		{"lab", "swarm", "--churn", "0"},
		{"lab", "swarm", "--settle", "0s"},
		{"lab", "swarm", "--settle", "-1s"},
		{"lab", "rate", "--messages", "0"},
		{"lab", "rate", "--shapes", "0x1"},
		{"lab", "rate", "--pace-step", "-1ms"},
		{"lab", "rate", "--pace-step", "1h"}, // longer than the latency run: before, taken, and slept an hour
		{"lab", "grid", "--slow-factor", "0"},
		{"lab", "grid", "--max-message", "0s"},
		// 0 was taken for the engines' default seed, 1: the same run as
		// --seed 1 under another name (lab swarm's 0 draws one at random).
		{"lab", "amtt", "--seed", "0"},
		{"lab", "grid", "--seed", "0"},
	} {
		r := runRefused(t, args...)
		failsCleanly(t, r)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
		if flag := args[2]; !strings.Contains(string(r.stderr), flag) {
			t.Errorf("%v: the error does not name %s: %s", args, flag, r.stderr)
		}
	}
}

// lab grid's --slow-factor follows the engine's rule (lab.ValidSlowFactor)
// and says it as its help does, in one message naming the flag: before,
// 0 was refused as "must be more than 0", 0.5 and 1 by the engine as
// "(want > 1)", 2000 as "(want > 1)" too, and NaN ran the grid.
func TestLabGridSlowFactorRule(t *testing.T) {
	const rule = "more than 1 and at most 1000"
	for _, v := range []string{"0", "0.5", "1", "1000.5", "NaN", "-3"} {
		r := runRefused(t, "lab", "grid", "--slow-factor", v, "--profile", "loopback", "--docs", "employees-1", "--switch=false")
		failsCleanly(t, r)
		want := "p2pmsg: --slow-factor " + v + ": want " + rule + "\n"
		if v == "NaN" { // refused as every float flag's NaN is (finiteFloats)
			want = `p2pmsg: --slow-factor "NaN": want a finite number` + "\n"
		}
		if r.code != 2 || string(r.stderr) != want {
			t.Errorf("--slow-factor %s: exit %d, %q; want exit 2 and %q", v, r.code, r.stderr, want)
		}
	}
	r := run(t, nil, "lab", "grid", "--help")
	if !strings.Contains(string(r.stdout), "decodes: "+rule) {
		t.Errorf("lab grid --help does not state --slow-factor's rule %q", rule)
	}
}

// TestLabCodecsInterrupted: lab codecs cut short by SIGINT exits 130
// saying so, as the other experiments do, instead of measuring every
// codec to the end. Its document is a FIFO: once lab codecs has opened
// it, its handler is in place; the signal comes before the document,
// so the measuring starts on an ended context whatever the timing.
func TestLabCodecsInterrupted(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "doc.xml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	cmd := exec.Command(binary_, "lab", "codecs", "--files", fifo)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0) // returns once lab codecs opened it
	if err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGINT)
	w.Write(bytes.Repeat([]byte("<a>some text</a>"), 1<<12))
	w.Close()
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.HasPrefix(stderr.String(), "p2pmsg: interrupted by SIGINT: ") {
		t.Fatalf("lab codecs interrupted: exit %d, stderr %q; want 130 and \"p2pmsg: interrupted by SIGINT: …\"", code, stderr.String())
	}
}

// TestLabSwarmInterruptedOneCause: lab swarm cut short by SIGINT says so
// in one short line that names one peer's error, not every peer's: once
// one peer stops, the swarm cancels the others, whose "context canceled"
// follows from it (with 1,000 peers the line was 1,000 errors long).
func TestLabSwarmInterruptedOneCause(t *testing.T) {
	// Interrupted once the swarm is built and publishing for an hour.
	// Its --out directory, made for the results and left empty, goes
	// (before, an empty one stayed).
	top := filepath.Join(t.TempDir(), "out")
	code, last := interrupted(t, nil, func(line string) bool { return strings.Contains(line, "peers connected") },
		"lab", "swarm", "--peers", "8", "--case", "propagate", "--duration", "1h", "--out", filepath.Join(top, "sub"))
	if code != 130 || !strings.HasPrefix(last, "p2pmsg: interrupted by SIGINT: swarm: propagate: ") {
		t.Fatalf("lab swarm interrupted: exit %d, last line %q; want 130 and \"p2pmsg: interrupted by SIGINT: swarm: propagate: …\"", code, last)
	}
	// One "peer N: " (the swarm's prefix to a peer's error); the error
	// itself may name peers ("peer 4's message 7").
	if n := len(regexp.MustCompile(`peer \d+: `).FindAllString(last, -1)); n > 1 {
		t.Errorf("the error names %d peers' errors, want one: %q", n, last)
	}
	// Interrupted while the mesh formed, it said the mesh timed out.
	if strings.Contains(last, "heard not every publisher") {
		t.Errorf("interrupted, but the error blames the mesh: %q", last)
	}
	if _, err := os.Stat(top); err == nil {
		t.Errorf("interrupted, but left its --out directory behind")
	}
}

// An unknown --profile is refused with the names the command takes:
// lab amtt's own "custom" and lab grid's "loopback" among them.
func TestLabUnknownProfileListsAccepted(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lab", "amtt", "--profile", "moon"}, "custom"},
		{[]string{"lab", "grid", "--profile", "moon"}, "loopback"},
	} {
		r := runRefused(t, c.args...)
		failsCleanly(t, r)
		if r.code != 2 || !strings.Contains(string(r.stderr), c.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 and %q among the names", c.args, r.code, r.stderr, c.want)
		}
	}
}

// A value a lab flag cannot parse is refused naming the flag, so that a
// user with several rates or size lists on the line knows which.
func TestLabBadValueNamesFlag(t *testing.T) {
	for _, args := range [][]string{
		{"lab", "amtt", "--up", "fast"},
		{"lab", "amtt", "--down", "fast"},
		{"lab", "rtt", "--sizes", "0"},
		{"lab", "rate", "--sizes", "x"},
	} {
		r := runRefused(t, args...)
		failsCleanly(t, r)
		if r.code != 2 || !strings.Contains(string(r.stderr), args[2]+":") {
			t.Errorf("%v: exit %d, %q; want exit 2 and the error naming %s", args, r.code, r.stderr, args[2])
		}
	}
}

// A profile that is not a named one as it is (custom, or a named one
// changed: dsl*) is headed with its link in lab amtt's table and chart,
// so that a saved amtt.md says what it measured, as the named ones do.
func TestLabAMTTHeadsChangedProfileWithItsLink(t *testing.T) {
	out := t.TempDir()
	r := run(t, nil, "lab", "amtt", "--profile", "custom,lan", "--up", "1M", "--rtt", "4ms",
		"--codecs", "none", "--sizes", "1", "--trials", "3", "--warmup", "0", "--out", out)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	md, _ := os.ReadFile(filepath.Join(out, "amtt.md"))
	svg, _ := os.ReadFile(filepath.Join(out, "amtt.svg"))
	for _, want := range []string{"#### custom (1Mbit/s up, unlimited down, 4ms RTT)", "#### lan* (1Mbit/s up, 100Mbit/s down, 4ms RTT)"} {
		if !bytes.Contains(r.stdout, []byte(want)) || !bytes.Contains(md, []byte(want)) {
			t.Errorf("no heading %q in the table:\n%s", want, r.stdout)
		}
		if title := "AMTT on " + strings.TrimPrefix(want, "#### "); !bytes.Contains(svg, []byte(title)) {
			t.Errorf("no title %q in the chart", title)
		}
	}
}

// interrupted runs the binary with args (and env added to the
// environment), sends it SIGINT once a line of its stderr satisfies
// ready, and returns its exit code and the last line it wrote.
func interrupted(t *testing.T, env []string, ready func(line string) bool, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary_, args...)
	cmd.Env = append(os.Environ(), env...)
	return testutil.Interrupt(t, cmd, syscall.SIGINT, ready)
}

// lab grid's link-change run comes after the grid: a mistyped
// --switch-from, --switch-to or --switch-doc is refused before the grid is
// measured (exit 2, one line naming the value), not after the grid's
// minutes or hours, with the grid's results lost.
func TestLabGridRefusesBadSwitchFirst(t *testing.T) {
	grid := []string{"lab", "grid", "--profile", "loopback", "--docs", "employees-1", "--choices", "identity,s2:1",
		"--trials", "3", "--warmup", "0", "--budget", "0", "--remeasure", "0"}
	for _, c := range []struct{ flag, val string }{
		{"--switch-from", "moon"},
		{"--switch-to", "moon"},
		{"--switch-doc", "employees-0x"},
	} {
		r := runRefused(t, append(slices.Clone(grid), c.flag, c.val)...)
		failsCleanly(t, r)
		if r.code != 2 || !strings.Contains(string(r.stderr), c.val) {
			t.Errorf("%s %s: exit %d, %q; want exit 2 and the value named", c.flag, c.val, r.code, r.stderr)
		}
	}
}

// lab grid's auto chooses among the codecs of --choices: a list with none
// (identity alone) is a wrong command line, refused before anything is
// measured, not a failure (exit 1) once the first cell's pair is up.
func TestLabGridRefusesChoicesWithoutCodec(t *testing.T) {
	for _, sw := range []string{"--switch=true", "--switch=false"} {
		r := runRefused(t, "lab", "grid", "--profile", "loopback", "--docs", "employees-1", "--choices", "identity", sw)
		failsCleanly(t, r)
		if r.code != 2 || !strings.Contains(string(r.stderr), "choices") || strings.Contains(string(r.stderr), "--switch") {
			t.Errorf("--choices identity %s: exit %d, %q; want exit 2 and the choices named", sw, r.code, r.stderr)
		}
	}
}

// A lab command's --out directory that cannot be written (here a file is
// in the way) fails the command before it measures anything, not after
// the run, whose results it would not print either.
func TestLabOutUnwritableRefusedFirst(t *testing.T) {
	file := writeFile(t, "notadir", []byte("x"))
	for _, args := range [][]string{
		{"lab", "amtt", "--profile", "none", "--sizes", "1", "--trials", "3", "--codecs", "none", "--out", file},
		{"lab", "grid", "--profile", "loopback", "--docs", "employees-1", "--choices", "identity,s2:1", "--trials", "3",
			"--warmup", "0", "--budget", "0", "--switch=false", "--out", file},
	} {
		r := runRefused(t, args...)
		failsCleanly(t, r)
		if !strings.Contains(string(r.stderr), "--out") {
			t.Errorf("%v: %q; want the error to name --out", args[:2], r.stderr)
		}
	}
}

// A lab command refused for its command line leaves no --out directory
// behind: it checks its configuration before it makes the directory
// (before, lab swarm and lab grid made it, then refused their
// configuration, and an empty directory stayed).
func TestLabRefusedLeavesNoOutDir(t *testing.T) {
	for _, args := range [][]string{
		{"lab", "swarm", "--peers", "1"},
		{"lab", "swarm", "--case", "nosuch"},
		{"lab", "grid", "--profile", "nosuch"},
		{"lab", "grid", "--switch-from", "nosuch"},
		{"lab", "amtt", "--codecs", "nosuch"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		r := runRefused(t, append(args, "--out", out)...)
		failsCleanly(t, r)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2", args, r.code)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: refused (%q), but left its --out directory behind", args, r.stderr)
		}
	}
}

// lab grid --from whose file cannot be read fails before it makes its
// --out directory (before, "lab grid --from nosuch --out d" failed with
// exit 1 and left an empty d/).
func TestLabGridFromUnreadableLeavesNoOutDir(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, from := range []string{filepath.Join(t.TempDir(), "nosuch"), bad} {
		out := filepath.Join(t.TempDir(), "out")
		r := runRefused(t, "lab", "grid", "--from", from, "--out", out)
		failsCleanly(t, r)
		if _, err := os.Stat(out); err == nil {
			t.Errorf("--from %s: failed (%q), but left its --out directory behind", filepath.Base(from), r.stderr)
		}
	}
}

// lab grid --from measures nothing: --json prints the JSON lines again
// (before, it printed the Markdown table, --json silently ignored), and a
// flag that shapes a measurement is refused naming it, not ignored
// (before, "--from f --profile dsl" reported every link of f and exited 0,
// "--trace t" wrote no t).
func TestLabGridFromHonoursJSONRefusesRunFlags(t *testing.T) {
	from := filepath.Join(t.TempDir(), "grid.jsonl")
	line := `{"profile":"dsl","cpu":"fast","doc":"employees-1","bytes":255,"choice":"identity","trials":5,"amtt_ns":67000000,"sent_bytes":255,"settled":5,"measured":1,"disturbed":0}` + "\n"
	if err := os.WriteFile(from, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runRefused(t, "lab", "grid", "--from", from, "--json")
	if r.code != 0 {
		t.Fatalf("--from --json: exit %d: %s", r.code, r.stderr)
	}
	var v struct {
		Profile string `json:"profile"`
		Choice  string `json:"choice"`
		AMTT    int64  `json:"amtt_ns"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(r.stdout), &v); err != nil || v.Profile != "dsl" || v.Choice != "identity" || v.AMTT != 67000000 {
		t.Fatalf("--from --json printed %q, want the JSON line again (%v)", r.stdout, err)
	}
	if r := runRefused(t, "lab", "grid", "--from", from); r.code != 0 || !bytes.HasPrefix(r.stdout, []byte("| link |")) {
		t.Fatalf("--from: exit %d, want the Markdown table: %q %s", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{
		{"--profile", "dsl"}, {"--docs", "employees-1"}, {"--full"}, {"--trials", "9"},
		{"--trace", filepath.Join(t.TempDir(), "trace")}, {"--switch=false"}, {"--seed", "3"},
	} {
		r := runRefused(t, append([]string{"lab", "grid", "--from", from}, args...)...)
		failsCleanly(t, r)
		if r.code != 2 || !strings.Contains(string(r.stderr), args[0][:strings.IndexAny(args[0]+"=", "=")]) || !strings.Contains(string(r.stderr), "--from") {
			t.Errorf("--from with %v: exit %d, %q; want 2 and an error naming both flags", args, r.code, r.stderr)
		}
	}
}

// A lab command that fails once running (exit 1) leaves no --out
// directory behind either: one it made and left empty is removed, up to
// the first directory that was there before.
func TestLabFailedLeavesNoOutDir(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		// fails after the directory was made, loading its models
		{"lab", "grid", "--models", garbage, "--profile", "loopback", "--docs", "employees-1", "--switch=false"},
	} {
		top := filepath.Join(t.TempDir(), "out")
		r := run(t, nil, append(args, "--out", filepath.Join(top, "sub"))...)
		failsCleanly(t, r)
		if r.code != 1 {
			t.Errorf("%v: exit %d, want 1", args, r.code)
		}
		if _, err := os.Stat(top); err == nil {
			t.Errorf("%v: failed (%q), but left its --out directory behind", args, r.stderr)
		}
	}
}

// lab grid --models in a directory that is not there is refused before
// the run, and the directory is not made (before, the grid ran and the
// models' Save made it, mode 0700).
func TestLabGridModelsDirNotMade(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nodir")
	r := runRefused(t, "lab", "grid", "--models", filepath.Join(dir, "m"), "--profile", "loopback", "--docs", "employees-1", "--switch=false", "--budget", "0")
	failsCleanly(t, r)
	if r.code != 2 || !strings.HasPrefix(string(r.stderr), "p2pmsg: no such file or directory: --models: stat ") {
		t.Errorf("exit %d, %q; want 2 and the missing directory", r.code, r.stderr)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("made the --models directory")
	}
}

// lab amtt's reports have one row per document and one table per profile:
// a document or profile given twice is refused, not measured twice with
// one of the two results missing from the table (and both in --json).
func TestLabAMTTRefusesDuplicates(t *testing.T) {
	for _, args := range [][]string{
		{"--sizes", "1,1"},
		{"--profile", "none,none"},
	} {
		r := runRefused(t, append([]string{"lab", "amtt", "--profile", "none", "--sizes", "1", "--trials", "3", "--codecs", "none"}, args...)...)
		failsCleanly(t, r)
		if r.code != 2 || !strings.Contains(string(r.stderr), "twice") {
			t.Errorf("%v: exit %d, %q; want exit 2 and the duplicate named", args, r.code, r.stderr)
		}
	}
}

// lab grid's reports have one row per cell (link, receiver CPU,
// document): a profile, document or CPU given twice is refused before
// anything is measured, not measured twice.
func TestLabGridRefusesDuplicates(t *testing.T) {
	for _, args := range [][]string{
		{"--profile", "loopback,loopback"},
		{"--docs", "employees-1,employees-1"},
		{"--cpu", "fast,fast"},
	} {
		r := runRefused(t, append([]string{"lab", "grid", "--profile", "loopback", "--docs", "employees-1", "--choices", "identity,s2:1",
			"--trials", "3", "--warmup", "0", "--budget", "0", "--switch=false"}, args...)...)
		failsCleanly(t, r)
		if r.code != 2 || !strings.Contains(string(r.stderr), "twice") {
			t.Errorf("%v: exit %d, %q; want exit 2 and the duplicate named", args, r.code, r.stderr)
		}
	}
}

// lab grid's random-SIZE document with a size it cannot take is refused
// with the sizes it can: before, the error ended on a bare "size"
// (`document "random-1G": size`).
func TestLabGridRandomDocSizeRefused(t *testing.T) {
	for _, doc := range []string{"random-0", "random-1G", "random-abc", "random-"} {
		r := runRefused(t, "lab", "grid", "--profile", "loopback", "--docs", doc, "--choices", "identity,s2:1",
			"--trials", "3", "--warmup", "0", "--budget", "0", "--switch=false")
		failsCleanly(t, r)
		if r.code != 2 || !strings.Contains(string(r.stderr), doc) || !strings.Contains(string(r.stderr), "64M") {
			t.Errorf("--docs %s: exit %d, %q; want exit 2, the document and the sizes it takes named", doc, r.code, r.stderr)
		}
	}
}

// lab grid's --switch-from, --switch-to and --switch-doc shape the
// link-change run; with --switch=false there is none, and each is refused
// (exit 2, the flag named) rather than silently ignored: before, `lab grid
// --switch=false --switch-doc employees-1` ran the grid and exited 0.
func TestLabGridSwitchFlagsNeedSwitch(t *testing.T) {
	for _, c := range []struct{ flag, val string }{
		{"--switch-from", "dsl"},
		{"--switch-to", "lan"},
		{"--switch-doc", "employees-1"},
	} {
		r := runRefused(t, "lab", "grid", "--profile", "loopback", "--docs", "employees-1", "--choices", "identity,s2:1",
			"--trials", "3", "--warmup", "0", "--budget", "0", "--remeasure", "0", "--switch=false", c.flag, c.val)
		failsCleanly(t, r)
		if r.code != 2 || !strings.Contains(string(r.stderr), c.flag) {
			t.Errorf("%s %s --switch=false: exit %d, %q; want exit 2 and the flag named", c.flag, c.val, r.code, r.stderr)
		}
	}
}

// lab rate's maximum-rate run stops at about 3 s of the warm-up's rate
// as well as at --messages: its help says so, on the flag too. Before,
// it said only "(fewer for large sizes: at most 256 MiB)", and
// `--layer propagate --messages 20000` sent 2,732 with nothing saying why.
func TestLabRateHelpStatesTimeCap(t *testing.T) {
	r := run(t, nil, "lab", "rate", "--help")
	var flagLine string
	for l := range strings.SplitSeq(string(r.stdout), "\n") {
		if strings.Contains(l, "--messages int") {
			flagLine = l
		}
	}
	if !strings.Contains(flagLine, "about 3 s") {
		t.Errorf("--messages help does not state the run's 3 s bound: %q", flagLine)
	}
	if !strings.Contains(string(r.stdout), "about 3 s at the warm-up's rate") {
		t.Errorf("lab rate --help does not state the run's 3 s bound:\n%s", r.stdout)
	}
}

// lab grid's help says switch.md is written only when the link-change
// run ran (before, it listed it among --out's files whatever --switch
// and --from were).
func TestLabGridHelpSaysWhenSwitchFile(t *testing.T) {
	r := run(t, nil, "lab", "grid", "--help")
	help := strings.Join(strings.Fields(string(r.stdout)), " ")
	if !strings.Contains(help, "switch.md, the link-change report, only when the link-change run ran: not with --switch=false") {
		t.Errorf("lab grid --help does not say when switch.md is written:\n%s", r.stdout)
	}
	for l := range strings.SplitSeq(string(r.stdout), "\n") {
		if strings.Contains(l, "--out string") && !strings.Contains(l, "when the link-change run ran (not with --switch=false; with --from, the one beside FILE), switch.md") {
			t.Errorf("--out's help names switch.md unconditionally: %q", l)
		}
	}
}

// lab swarm --case idle alone prints no empty delivery table: a line
// says why idle has none, then its cost per peer (before, the delivery
// table's header with no row).
func TestLabSwarmIdleSaysWhyNoDeliveries(t *testing.T) {
	r := run(t, nil, "lab", "swarm", "--peers", "4", "--degree", "2", "--case", "idle", "--settle", "1s", "--seed", "1")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	out := string(r.stdout)
	if strings.Contains(out, "delivered / expected") || !strings.HasPrefix(out, "idle sends no message") ||
		!strings.Contains(out, "| idle | 4 |") {
		t.Errorf("lab swarm --case idle printed:\n%s", out)
	}
}

// lab amtt --loss sets the segment loss of both ways of the link, which
// the rows record and the table's heading names; a loss beyond 20% or
// not a number is refused (before, --loss was an unknown flag).
func TestLabAMTTLoss(t *testing.T) {
	r := run(t, nil, "lab", "amtt", "--profile", "custom", "--rtt", "2ms", "--loss", "5%", "--codecs", "none,gzip",
		"--sizes", "1,50", "--trials", "3", "--warmup", "0", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, row := range jsonRows(t, r.stdout, 4, "link") {
		link := row["link"].(map[string]any)
		for _, way := range []string{"up", "down"} {
			if loss := link[way].(map[string]any)["loss"]; loss != 0.05 {
				t.Errorf("%s loss %v, want 0.05: %v", way, loss, row)
			}
		}
	}
	if !strings.Contains(string(r.stderr), "loss 5%/5%") {
		t.Errorf("the link described on stderr does not name its loss: %s", r.stderr)
	}
	for _, bad := range []string{"30%", "0.5", "lots", "-1%"} {
		r := run(t, nil, "lab", "amtt", "--loss", bad)
		failsCleanly(t, r)
		if r.code != 2 || !strings.Contains(string(r.stderr), "--loss") {
			t.Errorf("--loss %s: exit %d, %s", bad, r.code, r.stderr)
		}
	}
}
