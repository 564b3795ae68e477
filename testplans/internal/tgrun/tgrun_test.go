package tgrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	goruntime "runtime"
	"strconv"
	"strings"
	stdsync "sync"
	"syscall"
	"testing"
	"time"

	"github.com/testground/sdk-go/run"
	"github.com/testground/sdk-go/runtime"
	"github.com/testground/sdk-go/sync"
	"go.uber.org/goleak"

	"github.com/p2pmsg/p2pmsg/internal/lab"
	"github.com/p2pmsg/p2pmsg/internal/provenance"
	"github.com/p2pmsg/p2pmsg/internal/testutil"
	"github.com/p2pmsg/p2pmsg/testplans/internal/plan"
	"github.com/p2pmsg/p2pmsg/testplans/internal/planlink"
	"github.com/p2pmsg/p2pmsg/testplans/internal/tgrun"
)

// fakePlanEnv makes this test binary act as a plan instance: tgrun runs
// it instead of a built plan, so the tests exercise the real SDK against
// the embedded sync service without building anything.
const fakePlanEnv = "TGRUN_TEST_FAKE_PLAN"

// commandEnv makes this test binary act as the tgrun command, running
// itself as the plan: the tests signal a real tgrun process.
const commandEnv = "TGRUN_TEST_COMMAND"

func TestMain(m *testing.M) {
	if os.Getenv(fakePlanEnv) != "" {
		fakePlan()
		os.Exit(0)
	}
	if os.Getenv(commandEnv) != "" {
		os.Exit(tgrun.Command(os.Args[1:], os.Stdout, os.Stderr, tgrun.Options{Binary: os.Args[0], Env: []string{fakePlanEnv + "=1"}}))
	}
	// The SDK's RunEnv starts go-metrics' process-wide meter ticker,
	// which never stops.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}

func fakePlan() {
	plan.LoopbackHTTP()
	run.InvokeMap(map[string]interface{}{
		"ok": func(re *runtime.RunEnv, ic *run.InitContext) error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := ic.SyncClient.SignalAndWait(ctx, "both", re.TestInstanceCount); err != nil {
				return err
			}
			label, _, err := planlink.Link(re)
			if err != nil {
				return err
			}
			var b bytes.Buffer
			lab.WriteAMTTJSON(&b, []lab.AMTTResult{{
				Profile: label, Codec: re.TestGroupID, Records: 1, Bytes: 254, Trials: 3,
				ControlAMTT: time.Second, AMTT: time.Second / 2, DecreasePct: 50,
			}})
			re.RecordMessage("param greeting=%s", re.TestInstanceParams["greeting"])
			fmt.Fprintln(os.Stderr, "to stderr")
			return plan.WriteOutput(re, tgrun.AMTTFile, b.Bytes())
		},
		"fail": func(re *runtime.RunEnv) error {
			if re.TestGroupID == "b" {
				return errors.New("deliberate failure")
			}
			return nil
		},
		"hang": func(re *runtime.RunEnv) error {
			if err := plan.WriteOutput(re, "pid", []byte(strconv.Itoa(os.Getpid()))); err != nil {
				return err
			}
			re.RecordMessage("pid written")
			time.Sleep(time.Hour)
			return nil
		},
		"exit": func(re *runtime.RunEnv) error {
			os.Exit(3)
			return nil
		},
	})
}

const manifest = `name = "fake"

[builders."exec:go"]
enabled = true

[runners."local:exec"]
enabled = true

[[testcases]]
name = "ok"
instances = { min = 2, max = 2 }
  [testcases.params]
  greeting = { type = "string", desc = "a word", unit = "word", default = "hello" }
  count    = { type = "int", desc = "a number", unit = "things", default = 7 }
  ratio    = { type = "float", desc = "a fraction", unit = "fraction", default = 0.5 }
  verbose  = { type = "bool", desc = "say more", unit = "bool", default = false }
  pause    = { type = "duration", desc = "a wait", unit = "duration", default = "1s" }
  profile  = { type = "string", desc = "link profile, as the amtt plan's", unit = "name", default = "dsl" }
  up       = { type = "int", desc = "uplink, as the amtt plan's", unit = "bit/s", default = -1 }
  rtt_ms   = { type = "float", desc = "round trip, as the amtt plan's", unit = "ms", default = -1.0 }

[[testcases]]
name = "fail"
instances = { min = 2, max = 2 }

[[testcases]]
name = "hang"
instances = { min = 2, max = 2 }

[[testcases]]
name = "exit"
instances = { min = 2, max = 2 }
`

func composition(tcase, params string) string {
	return `[global]
plan = "fake"
case = "` + tcase + `"
total_instances = 2
builder = "exec:go"
runner = "local:exec"

[global.run.test_params]
` + params + `

[[groups]]
id = "a"
instances = { count = 1 }

[[groups]]
id = "b"
instances = { count = 1 }
  [groups.run.test_params]
`
}

// writePlan lays out a fake plan with one composition and returns its path.
func writePlan(t *testing.T, tcase, params string) string {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "fake", "compositions"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fake", "manifest.toml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	c := filepath.Join(dir, "fake", "compositions", tcase+".toml")
	if err := os.WriteFile(c, []byte(composition(tcase, params)), 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}

func runFake(t *testing.T, tcase, params string, timeout time.Duration) (*tgrun.Result, string, error) {
	c := writePlan(t, tcase, params)
	var log bytes.Buffer
	res, err := tgrun.Run(context.Background(), tgrun.Options{
		Composition: c, OutDir: t.TempDir(), RunID: "r1", Timeout: timeout,
		Binary: os.Args[0], Env: []string{fakePlanEnv + "=1"}, Log: &log,
	})
	return res, log.String(), err
}

func TestRunOK(t *testing.T) {
	res, log, err := runFake(t, "ok", `greeting = "bonjour"`, time.Minute)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if len(res.Outcomes) != 2 || res.Outcomes[0].Outcome != "ok" || res.Outcomes[1].Outcome != "ok" {
		t.Fatalf("outcomes %+v", res.Outcomes)
	}
	for _, want := range []string{"<< a[000] >> param greeting=bonjour", "<< b[000] >> to stderr", "<< b[000] >> OK"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	// Testground's layout, and the merged results.
	for _, f := range []string{"a/0/amtt.jsonl", "b/0/run.out", "outcome.json", "amtt.jsonl", "amtt.md", "amtt.svg"} {
		if _, err := os.Stat(filepath.Join(res.Dir, f)); err != nil {
			t.Error(err)
		}
	}
	// What made the results: the command line that repeats the run, and
	// this machine.
	var rec provenance.Record
	if b, err := os.ReadFile(filepath.Join(res.Dir, "run.json")); err != nil || json.Unmarshal(b, &rec) != nil {
		t.Fatalf("run.json: %s %v", b, err)
	}
	if c := rec.Command; len(c) != 6 || c[0] != "tgrun" || c[1] != "run" || c[2] != "-f" || filepath.Base(c[3]) != "ok.toml" ||
		c[4] != "--timeout" || c[5] != "1m0s" || rec.Start.IsZero() || rec.End.Before(rec.Start) || rec.CPUs != goruntime.NumCPU() {
		t.Errorf("run.json: %+v", rec)
	}
	f, err := os.Open(filepath.Join(res.Dir, "amtt.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	merged, err := lab.ReadAMTTJSON(f)
	if err != nil || len(merged) != 2 {
		t.Fatalf("merged %+v, %v", merged, err)
	}
}

func TestRunFailures(t *testing.T) {
	for _, c := range []struct {
		tcase, want string
	}{
		{"fail", "failure"},
		{"hang", "timeout"},
		{"exit", "exit"},
	} {
		t.Run(c.tcase, func(t *testing.T) {
			res, log, err := runFake(t, c.tcase, "", 5*time.Second)
			if !errors.Is(err, tgrun.ErrRunFailed) {
				t.Fatalf("err = %v, want ErrRunFailed\n%s", err, log)
			}
			var got []string
			for _, oc := range res.Outcomes {
				got = append(got, oc.Outcome)
			}
			if !strings.Contains(strings.Join(got, " "), c.want) {
				t.Fatalf("outcomes %v, want one %s\n%s", got, c.want, log)
			}
			b, err := os.ReadFile(filepath.Join(res.Dir, "outcome.json"))
			if err != nil || !bytes.Contains(b, []byte(`"outcome": "`+c.want+`"`)) {
				t.Fatalf("outcome.json: %s %v", b, err)
			}
		})
	}
}

// The environment is what Testground's local:exec runner gives, in the
// SDK's own names: the SDK reads back exactly the parameters.
func TestInstanceEnv(t *testing.T) {
	rp := runtime.RunParams{
		TestPlan: "amtt", TestCase: "amtt", TestRun: "r9", TestInstanceCount: 2,
		TestGroupID: "sender", TestGroupInstanceCount: 1,
		TestInstanceParams: map[string]string{"profile": "dsl", "codecs": "none,gzip:6"},
		TestOutputsPath:    "/out", TestTempPath: "/tmp/x",
	}
	env := tgrun.InstanceEnv(rp, "127.0.0.1", 5050, []string{"EXTRA=1"})
	got, err := runtime.ParseRunParams(env)
	if err != nil {
		t.Fatal(err)
	}
	if got.TestPlan != rp.TestPlan || got.TestCase != rp.TestCase || got.TestRun != rp.TestRun ||
		got.TestInstanceCount != 2 || got.TestGroupID != "sender" || got.TestGroupInstanceCount != 1 ||
		got.TestOutputsPath != "/out" || got.TestTempPath != "/tmp/x" || got.TestSidecar ||
		!reflect.DeepEqual(got.TestInstanceParams, rp.TestInstanceParams) {
		t.Fatalf("parsed %+v\nfrom %v", got, env)
	}
	joined := strings.Join(env, "\n")
	for _, want := range []string{"SYNC_SERVICE_HOST=127.0.0.1", "SYNC_SERVICE_PORT=5050", "TEST_SIDECAR=false", "EXTRA=1"} {
		if !strings.Contains(joined, want) {
			t.Errorf("env lacks %s", want)
		}
	}
}

// The embedded service speaks the SDK's protocol: barriers and pub/sub.
func TestSyncService(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ss, err := tgrun.StartSyncService(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	t.Setenv(sync.EnvServiceHost, ss.Host())
	t.Setenv(sync.EnvServicePort, fmt.Sprint(ss.Port()))
	// The SDK writes its metrics files to the outputs path: a temporary
	// directory, not the package's.
	re := runtime.NewRunEnv(runtime.RunParams{TestPlan: "p", TestCase: "c", TestRun: "r", TestInstanceCount: 2,
		TestOutputsPath: t.TempDir()})
	defer re.Close()
	var clients []*sync.DefaultClient
	for range 2 {
		c, err := sync.NewBoundClient(ctx, re)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	type info struct{ N int }
	topic := sync.NewTopic("t", &info{})
	ch := make(chan *info, 1)
	if _, err := clients[1].Subscribe(ctx, topic, ch); err != nil {
		t.Fatal(err)
	}
	if _, err := clients[0].Publish(ctx, topic, &info{N: 42}); err != nil {
		t.Fatal(err)
	}
	if got := <-ch; got.N != 42 {
		t.Fatalf("received %+v", got)
	}
	done := make(chan error, 2)
	for _, c := range clients {
		go func() { _, err := c.SignalAndWait(ctx, "s", 2); done <- err }()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// loadCase loads composition c and the test case name of its plan's
// manifest.
func loadCase(t *testing.T, c, name string) (*tgrun.Composition, *tgrun.TestCase) {
	t.Helper()
	comp, err := tgrun.LoadComposition(c)
	if err != nil {
		t.Fatal(err)
	}
	man, err := tgrun.LoadManifest(filepath.Join(filepath.Dir(filepath.Dir(c)), "manifest.toml"))
	if err != nil {
		t.Fatal(err)
	}
	tc, err := man.TestCase(name)
	if err != nil {
		t.Fatal(err)
	}
	return comp, tc
}

func TestGroupParams(t *testing.T) {
	comp, tc := loadCase(t, writePlan(t, "ok", `greeting = "global"`), "ok")
	comp.Groups[1].Run.TestParams = map[string]string{"greeting": "group"}
	p, err := tgrun.GroupParams(comp, tc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p["a"]["greeting"] != "global" || p["b"]["greeting"] != "group" || p["a"]["count"] != "7" {
		t.Fatalf("params %v", p)
	}
	if p, _ := tgrun.GroupParams(comp, tc, map[string]string{"greeting": "cli"}); p["b"]["greeting"] != "cli" {
		t.Fatalf("override lost: %v", p)
	}
	for _, bad := range []map[string]string{{"nope": "x"}, {"greeting": "a=b"}, {"greeting": "a|b"}} {
		if _, err := tgrun.GroupParams(comp, tc, bad); !errors.Is(err, tgrun.ErrComposition) {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestLoadCompositionErrors(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"noplan":  "[global]\ncase = \"c\"\n[[groups]]\nid = \"a\"\ninstances = { count = 1 }\n",
		"runs":    "[global]\nplan = \"p\"\ncase = \"c\"\n[[groups]]\nid = \"a\"\ninstances = { count = 1 }\n[[runs]]\nid = \"r\"\n",
		"total":   "[global]\nplan = \"p\"\ncase = \"c\"\ntotal_instances = 3\n[[groups]]\nid = \"a\"\ninstances = { count = 1 }\n",
		"dup":     "[global]\nplan = \"p\"\ncase = \"c\"\n[[groups]]\nid = \"a\"\ninstances = { count = 1 }\n[[groups]]\nid = \"a\"\ninstances = { count = 1 }\n",
		"percent": "[global]\nplan = \"p\"\ncase = \"c\"\n[[groups]]\nid = \"a\"\ninstances = { percentage = 0.5 }\n",
		"syntax":  "[global\n",
	} {
		p := filepath.Join(dir, name+".toml")
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := tgrun.LoadComposition(p); !errors.Is(err, tgrun.ErrComposition) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// Every composition in the repository resolves against its plan's
// manifest the way tgrun will run it.
func TestRepositoryCompositions(t *testing.T) {
	comps, _ := filepath.Glob("../../*/compositions/*.toml")
	if len(comps) < 3 {
		t.Fatalf("found only %v", comps)
	}
	for _, c := range comps {
		comp, err := tgrun.LoadComposition(c)
		if err != nil {
			t.Error(err)
			continue
		}
		dir, err := tgrun.FindPlanDir(c, comp.Global.Plan)
		if err != nil {
			t.Error(err)
			continue
		}
		man, err := tgrun.LoadManifest(filepath.Join(dir, "manifest.toml"))
		if err != nil {
			t.Error(err)
			continue
		}
		tc, err := man.TestCase(comp.Global.Case)
		if err != nil {
			t.Error(err)
			continue
		}
		if _, err := tgrun.GroupParams(comp, tc, nil); err != nil {
			t.Errorf("%s: %v", c, err)
		}
		if b, _ := json.Marshal(comp); len(b) == 0 {
			t.Errorf("%s: empty", c)
		}
	}
}

// startWriter is a log that says, once, when an instance has started.
type startWriter struct {
	mu      stdsync.Mutex
	buf     bytes.Buffer
	once    stdsync.Once
	started chan struct{}
}

func (w *startWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if bytes.Contains(w.buf.Bytes(), []byte(">> START")) {
		w.once.Do(func() { close(w.started) })
	}
	return len(p), nil
}

// TestRunCanceled: a run whose context ends (tgrun interrupted by
// SIGINT) reports its instances as canceled, not as having outlasted
// the run's time limit.
func TestRunCanceled(t *testing.T) {
	c := writePlan(t, "hang", "")
	log := &startWriter{started: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-log.started
		cancel()
	}()
	res, err := tgrun.Run(ctx, tgrun.Options{
		Composition: c, OutDir: t.TempDir(), RunID: "r1", Timeout: time.Hour,
		Binary: os.Args[0], Env: []string{fakePlanEnv + "=1"}, Log: log,
	})
	if !errors.Is(err, tgrun.ErrRunFailed) {
		t.Fatalf("err = %v, want ErrRunFailed", err)
	}
	for _, oc := range res.Outcomes {
		if oc.Outcome != "canceled" {
			t.Errorf("outcome %q (%s), want canceled", oc.Outcome, oc.Error)
		}
	}
}

// Every value is checked against the type the manifest declares for its
// name, as the SDK and the plans parse it, wherever it comes from: the
// command line (--param), the composition's global test_params or a
// group's. Before, a value of the wrong type reached every instance,
// which each failed ("strconv.Atoi: parsing "x"").
func TestParamTypes(t *testing.T) {
	comp, tc := loadCase(t, writePlan(t, "ok", ""), "ok")
	for _, ok := range []map[string]string{
		{"count": "3"}, {"count": "-1"}, {"ratio": "2.5"}, {"ratio": "1e-3"}, {"verbose": "true"},
		{"pause": "250ms"}, {"greeting": "anything at all"}, {"count": ""}, // empty: the plan's own default
	} {
		if _, err := tgrun.GroupParams(comp, tc, ok); err != nil {
			t.Errorf("%v refused: %v", ok, err)
		}
	}
	for _, c := range []struct {
		where           string
		name, val, typ_ string
	}{
		{"--param", "count", "x", "int"},
		{"--param", "count", "2.5", "int"},
		{"--param", "ratio", "fast", "float"},
		{"--param", "verbose", "maybe", "bool"},
		{"--param", "pause", "1", "duration"},
		{"--param", "nosuch", "1", ""},
		{"global test_params", "count", "x", "int"},
		{"group b test_params", "pause", "soon", "duration"},
	} {
		comp, _ := tgrun.LoadComposition(writePlan(t, "ok", ""))
		var over map[string]string
		switch c.where {
		case "--param":
			over = map[string]string{c.name: c.val}
		case "global test_params":
			comp.Global.Run.TestParams = map[string]string{c.name: c.val}
		default:
			comp.Groups[1].Run.TestParams = map[string]string{c.name: c.val}
		}
		_, err := tgrun.GroupParams(comp, tc, over)
		var pe *tgrun.ParamError
		if !errors.As(err, &pe) || !errors.Is(err, tgrun.ErrComposition) {
			t.Errorf("%s %s=%s: err = %v, want a ParamError", c.where, c.name, c.val, err)
			continue
		}
		if pe.Source != c.where || pe.Name != c.name || pe.Value != c.val || pe.Type != c.typ_ {
			t.Errorf("%s %s=%s: %+v", c.where, c.name, c.val, pe)
		}
		msg := err.Error()
		for _, want := range []string{c.where, fmt.Sprintf("%s=%q", c.name, c.val), c.typ_} {
			if !strings.Contains(msg, want) {
				t.Errorf("%q does not say %q", msg, want)
			}
		}
	}
}

// tgrun --help (-h, help, run --help) prints the usage on stdout and
// exits 0; a wrong command line gets it on stderr and exit 2. Before,
// asking for help exited 2.
func TestCommandUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"--help"}, 0},
		{[]string{"-h"}, 0},
		{[]string{"help"}, 0},
		{[]string{"run", "--help"}, 0},
		{[]string{"run", "-h"}, 0},
		{nil, 2},
		{[]string{"walk"}, 2},
		{[]string{"run"}, 2},
		{[]string{"run", "--nosuch"}, 2},
		{[]string{"run", "-f", "a.toml", "extra"}, 2},
		{[]string{"run", "--param", "novalue", "-f", "a.toml"}, 2},
	} {
		var stdout, stderr bytes.Buffer
		code := tgrun.Main(c.args, &stdout, &stderr)
		usage, other := &stdout, &stderr
		if c.code != 0 {
			usage, other = &stderr, &stdout
		}
		if code != c.code || !strings.Contains(usage.String(), "usage: tgrun run -f COMPOSITION") || !strings.Contains(usage.String(), "-param") || other.Len() > 0 {
			t.Errorf("tgrun %q: exit %d, want %d; stdout %q, stderr %q", c.args, code, c.code, stdout.String(), stderr.String())
		}
	}
}

// A parameter tgrun cannot pass, named on the command line or in a
// composition, is refused with exit 2 before any plan is built or run,
// naming the parameter, its value and the type expected, and so is a
// mistake in the last of several compositions before the first runs.
// Before, an unknown name was refused only once the plan was built and a
// value of the wrong type failed every instance (exit 1). The fake plan
// has no Go code: building it would fail, with exit 1.
func TestCommandRefusesParamsBeforeBuilding(t *testing.T) {
	good := writePlan(t, "ok", "")
	badComp := writePlan(t, "ok", `count = "many"`)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-f", good, "--param", "count=x"}, []string{`--param: parameter count="x"`, "int"}},
		{[]string{"-f", good, "--param", "ratio=fast"}, []string{`ratio="fast"`, "float"}},
		{[]string{"-f", good, "--param", "nosuch=1"}, []string{`nosuch="1"`, "declares no such parameter", "greeting"}},
		{[]string{"-f", good, "-f", badComp}, []string{`global test_params: parameter count="many"`, "int"}},
	} {
		out := t.TempDir()
		var stdout, stderr bytes.Buffer
		code := tgrun.Main(append([]string{"run", "--out", out}, c.args...), &stdout, &stderr)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2; stderr %q", c.args, code, stderr.String())
		}
		for _, want := range c.want {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("%q: stderr %q does not say %q", c.args, stderr.String(), want)
			}
		}
		if strings.Contains(stderr.String(), "building") {
			t.Errorf("%q: built before refusing: %q", c.args, stderr.String())
		}
		if ents, _ := os.ReadDir(out); len(ents) > 0 {
			t.Errorf("%q: wrote %v before refusing", c.args, ents)
		}
	}
}

// tgrun's error line names the program and the composition once each,
// then what went wrong. Before, the package's own prefix followed the
// command's, and LoadComposition's path the command's: "tgrun: C: tgrun:
// unusable composition: C: global.plan and global.case are required",
// "tgrun: C: tgrun: run failed: b[000] failure".
func TestCommandErrorLine(t *testing.T) {
	dir := t.TempDir()
	noCase := filepath.Join(dir, "nocase.toml")
	if err := os.WriteFile(noCase, []byte("[global]\nplan = \"fake\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.toml")
	for _, c := range []struct {
		comp, want string
		code       int
	}{
		{noCase, "unusable composition: global.plan and global.case are required", 2},
		{missing, "unusable composition: open " + missing + ": no such file or directory", 2},
		{writePlan(t, "fail", ""), "run failed: b[000] failure", 1},
	} {
		var stdout, stderr bytes.Buffer
		base := tgrun.Options{Binary: os.Args[0], Env: []string{fakePlanEnv + "=1"}, Log: io.Discard}
		code := tgrun.Command([]string{"run", "-f", c.comp, "--out", t.TempDir()}, &stdout, &stderr, base)
		want := "tgrun: " + c.comp + ": " + c.want
		if got := stderr.String(); code != c.code || !strings.HasPrefix(got, want) || strings.Count(got, "\n") != 1 || strings.Count(got, "tgrun:") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and one line starting %q", c.comp, code, got, c.code, want)
		}
	}
}

// tgrun cut short by SIGINT or SIGTERM exits 128+signal, as the p2pmsg
// command does, saying so in one line, with no instance left running and
// their outputs kept. Before, it exited 1 ("run failed: a[000] canceled,
// b[000] canceled").
func TestCommandInterrupted(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			out := t.TempDir()
			cmd := exec.Command(os.Args[0], "run", "-f", writePlan(t, "hang", ""), "--out", out, "--run-id", "r1", "--timeout", "1h")
			cmd.Env = append(os.Environ(), commandEnv+"=1")
			started := 0 // both instances
			code, last := testutil.Interrupt(t, cmd, sig, func(line string) bool {
				if strings.Contains(line, ">> pid written") {
					started++
				}
				return started == 2
			})
			runDir := filepath.Join(out, "fake", "r1")
			want := fmt.Sprintf("tgrun: interrupted by %s: run r1 stopped, every instance ended; outputs so far in %s", map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM"}[sig], runDir)
			if code != 128+int(sig) || last != want {
				t.Fatalf("exit %d, last line %q; want %d and %q", code, last, 128+int(sig), want)
			}
			for _, g := range []string{"a", "b"} {
				b, err := os.ReadFile(filepath.Join(runDir, g, "0", "pid"))
				if err != nil {
					t.Fatalf("outputs not kept: %v", err)
				}
				pid, _ := strconv.Atoi(string(b))
				if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
					syscall.Kill(pid, syscall.SIGKILL)
					t.Errorf("instance %s (pid %d) left running (kill 0: %v)", g, pid, err)
				}
			}
			if b, err := os.ReadFile(filepath.Join(runDir, "outcome.json")); err != nil || !bytes.Contains(b, []byte(`"outcome": "canceled"`)) {
				t.Errorf("outcome.json: %s %v", b, err)
			}
		})
	}
}

// The merged AMTT table and chart head a custom or changed link with the
// link, as `p2pmsg lab amtt` does; before, with the name alone.
func TestRunHeadsCustomLink(t *testing.T) {
	res, log, err := runFake(t, "ok", "profile = \"custom\"\nup = \"1000000\"\nrtt_ms = \"40\"", time.Minute)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	want := "custom (1Mbit/s up, unlimited down, 40ms RTT)"
	md, _ := os.ReadFile(filepath.Join(res.Dir, tgrun.AMTTMarkdown))
	svg, _ := os.ReadFile(filepath.Join(res.Dir, tgrun.AMTTChart))
	if !bytes.Contains(md, []byte("#### "+want+"\n")) || !strings.Contains(log, "#### "+want) {
		t.Errorf("no heading %q:\n%s", want, md)
	}
	if !bytes.Contains(svg, []byte("AMTT on "+want)) {
		t.Errorf("no chart title %q", "AMTT on "+want)
	}
}
