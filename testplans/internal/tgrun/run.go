package tgrun

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/testground/sdk-go/ptypes"
	"github.com/testground/sdk-go/runtime"
	tgsync "github.com/testground/sdk-go/sync"

	"github.com/p2pmsg/p2pmsg/internal/provenance"
)

// localSubnet is the TEST_SUBNET Testground's local:exec runner gives.
const localSubnet = "127.1.0.0/16"

// ErrRunFailed is returned when an instance failed, crashed, timed out or
// ended without reporting an outcome.
var ErrRunFailed = errors.New("tgrun: run failed")

// Options describe one run.
type Options struct {
	// Composition is the composition file to run.
	Composition string
	// PlanDir is the plan's directory; empty finds it (FindPlanDir).
	PlanDir string
	// OutDir is the results root: the run's folder is
	// OutDir/<plan>/<run ID>, each instance's outputs under
	// <group>/<index> there, as Testground lays them out. Default "results".
	OutDir string
	// RunID names the run; default a random one.
	RunID string
	// Params override test parameters of every group (tgrun's --param,
	// the name their ParamErrors give them).
	Params map[string]string
	// Timeout bounds the run, build excluded; default 10 minutes.
	Timeout time.Duration
	// Binary, when set, is run instead of building the plan.
	Binary string
	// Env is added to every instance's environment (tests use it).
	Env []string
	// Log receives the run's output; default os.Stderr.
	Log io.Writer
}

// Outcome is how an instance ended.
type Outcome struct {
	Group    string `json:"group"`
	Index    int    `json:"index"`
	Outcome  string `json:"outcome"` // ok, failure, crash, incomplete, timeout, canceled, exit
	Error    string `json:"error,omitempty"`
	ExitCode int    `json:"exit_code"`
	Outputs  string `json:"outputs"`
}

// Result is a finished run.
type Result struct {
	RunID    string    `json:"run_id"`
	Plan     string    `json:"plan"`
	Case     string    `json:"case"`
	Dir      string    `json:"dir"`
	Outcomes []Outcome `json:"instances"`
}

// prepared is a composition resolved against its plan.
type prepared struct {
	comp    *Composition
	man     *Manifest
	tc      *TestCase
	planDir string
	params  map[string]map[string]string // by group
}

// Check resolves o's composition against its plan's manifest as Run
// does — the plan found, its test case, the instance count it takes,
// every group's parameters declared and of their declared types — and
// builds and starts nothing. It returns the plan's directory. Its errors
// wrap ErrComposition (parameters': *ParamError) but for I/O's.
func Check(o Options) (planDir string, err error) {
	p, err := prepare(o)
	if err != nil {
		return "", err
	}
	return p.planDir, nil
}

func prepare(o Options) (*prepared, error) {
	comp, err := LoadComposition(o.Composition)
	if err != nil {
		return nil, err
	}
	p := &prepared{comp: comp, planDir: o.PlanDir}
	if p.planDir == "" {
		if p.planDir, err = FindPlanDir(o.Composition, comp.Global.Plan); err != nil {
			return nil, err
		}
	}
	if p.man, err = LoadManifest(filepath.Join(p.planDir, "manifest.toml")); err != nil {
		return nil, err
	}
	if p.tc, err = p.man.TestCase(comp.Global.Case); err != nil {
		return nil, err
	}
	if n := int(comp.Total()); n < p.tc.Instances.Min || n > p.tc.Instances.Max {
		return nil, fmt.Errorf("%w: %d instances, test case %s takes [%d, %d]", ErrComposition, n, p.tc.Name, p.tc.Instances.Min, p.tc.Instances.Max)
	}
	if p.params, err = GroupParams(comp, p.tc, o.Params); err != nil {
		return nil, err
	}
	return p, nil
}

// Run checks the composition (Check), builds the plan unless o.Binary is
// set, runs every instance of the composition against an embedded sync
// service, and collects the outputs. It returns an error wrapping
// ErrRunFailed if any instance did not succeed; the Result is filled in
// either way once the instances have started. When ctx ends first, every
// instance's process group is killed and the instances are "canceled",
// with ctx's cause (context.Cause) as their error; their outputs stay.
func Run(ctx context.Context, o Options) (*Result, error) {
	began := provenance.Begin()
	pr, err := prepare(o)
	if err != nil {
		return nil, err
	}
	comp, man, tc, params := pr.comp, pr.man, pr.tc, pr.params
	o.PlanDir = pr.planDir
	log := o.Log
	if log == nil {
		log = os.Stderr
	}
	if r := comp.Global.Runner; r != "" && r != "local:exec" {
		fmt.Fprintf(log, "tgrun: the composition asks for %s; tgrun runs it as local:exec would\n", r)
	}
	if o.RunID == "" {
		var b [6]byte
		rand.Read(b[:])
		o.RunID = time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
	}
	if o.OutDir == "" {
		o.OutDir = "results"
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	runDir, err := filepath.Abs(filepath.Join(o.OutDir, man.Name, o.RunID))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, err
	}

	bin := o.Binary
	if bin == "" {
		var cleanup func()
		if bin, cleanup, err = Build(ctx, o.PlanDir, log); err != nil {
			return nil, err
		}
		defer cleanup()
	}

	ss, err := StartSyncService(ctx)
	if err != nil {
		return nil, err
	}
	defer ss.Close()
	fmt.Fprintf(log, "tgrun: sync service on %s:%d; run %s of %s/%s, %d instances, outputs in %s\n",
		ss.Host(), ss.Port(), o.RunID, man.Name, tc.Name, comp.Total(), runDir)

	res := &Result{RunID: o.RunID, Plan: man.Name, Case: tc.Name, Dir: runDir}
	rctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	_, subnet, _ := net.ParseCIDR(localSubnet)
	out := &syncWriter{w: log}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		start = time.Now()
	)
	var tmpdirs []string
	defer func() {
		for _, d := range tmpdirs {
			os.RemoveAll(d)
		}
	}()
	for _, g := range comp.Groups {
		var profiles map[string]string
		if comp.Global.Run != nil {
			profiles = comp.Global.Run.Profiles
		}
		if g.Run.Profiles != nil {
			profiles = g.Run.Profiles
		}
		for i := 0; i < int(g.Instances.Count); i++ {
			odir := filepath.Join(runDir, g.ID, strconv.Itoa(i))
			if err := os.MkdirAll(odir, 0o755); err != nil {
				cancel()
				return nil, err
			}
			tmp, err := os.MkdirTemp("", "tgrun-")
			if err != nil {
				cancel()
				return nil, err
			}
			tmpdirs = append(tmpdirs, tmp)
			rp := runtime.RunParams{
				TestPlan: man.Name, TestCase: tc.Name, TestRun: o.RunID,
				TestInstanceCount: int(comp.Total()), TestSidecar: false,
				TestSubnet:             &ptypes.IPNet{IPNet: *subnet},
				TestGroupID:            g.ID,
				TestGroupInstanceCount: int(g.Instances.Count),
				TestInstanceParams:     params[g.ID],
				TestOutputsPath:        odir,
				TestTempPath:           tmp,
				TestStartTime:          time.Now(),
				TestCaptureProfiles:    profiles,
			}
			inst := &instance{tag: fmt.Sprintf("%s[%03d]", g.ID, i), out: out, start: start,
				oc: Outcome{Group: g.ID, Index: i, Outputs: odir}}
			cmd := exec.Command(bin)
			cmd.Env = InstanceEnv(rp, ss.Host(), ss.Port(), o.Env)
			cmd.Dir = odir
			cmd.SysProcAttr = procAttr()
			if err := inst.launch(cmd); err != nil {
				cancel()
				return nil, fmt.Errorf("tgrun: starting %s: %w", inst.tag, err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				oc := inst.wait(rctx)
				mu.Lock()
				res.Outcomes = append(res.Outcomes, oc)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	sort.Slice(res.Outcomes, func(i, j int) bool {
		a, b := res.Outcomes[i], res.Outcomes[j]
		return a.Group < b.Group || a.Group == b.Group && a.Index < b.Index
	})
	var failed []string
	for _, oc := range res.Outcomes {
		fmt.Fprintf(log, "tgrun: %s[%03d]: %s %s\n", oc.Group, oc.Index, oc.Outcome, oc.Error)
		if oc.Outcome != "ok" {
			failed = append(failed, fmt.Sprintf("%s[%03d] %s", oc.Group, oc.Index, oc.Outcome))
		}
	}
	if b, err := json.MarshalIndent(res, "", "  "); err == nil {
		os.WriteFile(filepath.Join(runDir, "outcome.json"), append(b, '\n'), 0o644)
	}
	werr := provenance.Write(runDir, runRecord(o, began))
	if len(failed) > 0 {
		return res, errors.Join(fmt.Errorf("%w: %s", ErrRunFailed, strings.Join(failed, ", ")), werr)
	}
	if werr != nil {
		return res, werr
	}
	if err := Collect(runDir, Links(params), log); err != nil {
		return res, err
	}
	fmt.Fprintf(log, "tgrun: run %s ok in %v; results in %s\n", o.RunID, time.Since(start).Round(time.Millisecond), runDir)
	return res, nil
}

// runRecord is the run's run.json: the tgrun command line that repeats
// it (the composition, its parameters by name, the timeout) and, as tgrun
// runs under go run, which stamps no commit, the plan directory's
// commit by git describe.
func runRecord(o Options, start provenance.Start) provenance.Record {
	line := []string{"tgrun", "run", "-f", o.Composition}
	for _, k := range slices.Sorted(maps.Keys(o.Params)) {
		line = append(line, "--param", k+"="+o.Params[k])
	}
	r := provenance.New(append(line, "--timeout", o.Timeout.String()), start)
	if r.Commit == "" {
		if b, err := exec.Command("git", "-C", o.PlanDir, "describe", "--always", "--dirty", "--abbrev=40").Output(); err == nil {
			r.Commit = strings.TrimSpace(string(b))
		}
	}
	return r
}

// Build builds the plan in planDir as the exec:go builder does (go build
// of the plan's package, in its module) into a temporary directory that
// cleanup removes.
func Build(ctx context.Context, planDir string, log io.Writer) (bin string, cleanup func(), err error) {
	work, err := os.MkdirTemp("", "tgrun-build-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(work) }
	bin = filepath.Join(work, "plan-"+filepath.Base(planDir))
	fmt.Fprintf(log, "tgrun: building plan %s\n", planDir)
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = planDir
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("tgrun: building %s: %w\n%s", planDir, err, out)
	}
	fmt.Fprintf(log, "tgrun: built in %v\n", time.Since(start).Round(time.Millisecond))
	return bin, cleanup, nil
}

// InstanceEnv is the environment of one instance: the runtime variables
// Testground's local:exec runner sets (the SDK's own RunParams.ToEnvVars,
// so names match sdk-go v0.3.0 exactly), the sync service's address, and
// PATH, HOME and TMPDIR from tgrun's own environment. No InfluxDB URL: the
// SDK then keeps metrics in the outputs directory only.
func InstanceEnv(rp runtime.RunParams, host string, port int, extra []string) []string {
	if rp.TestSubnet == nil { // ToEnvVars dereferences it
		_, subnet, _ := net.ParseCIDR(localSubnet)
		rp.TestSubnet = &ptypes.IPNet{IPNet: *subnet}
	}
	var env []string
	for k, v := range rp.ToEnvVars() {
		env = append(env, k+"="+v)
	}
	env = append(env, tgsync.EnvServiceHost+"="+host, tgsync.EnvServicePort+"="+strconv.Itoa(port))
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	sort.Strings(env)
	return append(env, extra...)
}

// syncWriter serializes lines from many instances.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) line(format string, a ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.w, format+"\n", a...)
}

// instance is one running instance.
type instance struct {
	tag   string
	out   *syncWriter
	start time.Time
	cmd   *exec.Cmd
	oc    Outcome
	// set by the stdout reader
	mu                  sync.Mutex
	ok, failed, crashed bool
	errText             string
	readers             sync.WaitGroup
}

func (in *instance) launch(cmd *exec.Cmd) error {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	in.cmd = cmd
	in.readers.Add(2)
	go in.readStdout(stdout)
	go in.readStderr(stderr)
	return nil
}

func (in *instance) elapsed() string {
	return fmt.Sprintf("%8.3fs", time.Since(in.start).Seconds())
}

// readStdout reads the SDK's JSON events, one per line, as Testground's
// runner does: the outcome is a success event with no failure or crash.
func (in *instance) readStdout(r io.Reader) {
	defer in.readers.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var rec struct {
			Event *runtime.Event `json:"event"`
		}
		if json.Unmarshal(line, &rec) != nil || rec.Event == nil {
			in.out.line("%s << %s >> %s", in.elapsed(), in.tag, line)
			continue
		}
		e := rec.Event
		in.mu.Lock()
		switch {
		case e.SuccessEvent != nil:
			in.ok = true
			in.out.line("%s << %s >> OK", in.elapsed(), in.tag)
		case e.FailureEvent != nil:
			in.failed, in.errText = true, e.FailureEvent.Error
			in.out.line("%s << %s >> FAIL %s", in.elapsed(), in.tag, e.FailureEvent.Error)
		case e.CrashEvent != nil:
			in.crashed, in.errText = true, e.CrashEvent.Error
			in.out.line("%s << %s >> CRASH %s\n%s", in.elapsed(), in.tag, e.CrashEvent.Error, e.CrashEvent.Stacktrace)
		case e.MessageEvent != nil:
			in.out.line("%s << %s >> %s", in.elapsed(), in.tag, e.MessageEvent.Message)
		case e.StartEvent != nil:
			in.out.line("%s << %s >> START", in.elapsed(), in.tag)
		}
		in.mu.Unlock()
	}
}

func (in *instance) readStderr(r io.Reader) {
	defer in.readers.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		in.out.line("%s << %s >> %s", in.elapsed(), in.tag, sc.Text())
	}
}

// wait waits for the instance to exit, ending its process group if ctx
// ends first, and judges it.
func (in *instance) wait(ctx context.Context) Outcome {
	exited := make(chan error, 1)
	go func() {
		in.readers.Wait() // Wait closes the pipes: read them to the end first
		exited <- in.cmd.Wait()
	}()
	var err error
	timedOut := false
	select {
	case err = <-exited:
	case <-ctx.Done():
		timedOut = true
		syscall.Kill(-in.cmd.Process.Pid, syscall.SIGKILL) // our child's process group
		err = <-exited
	}
	oc := in.oc
	oc.ExitCode = in.cmd.ProcessState.ExitCode()
	in.mu.Lock()
	defer in.mu.Unlock()
	switch {
	case timedOut && errors.Is(ctx.Err(), context.DeadlineExceeded):
		oc.Outcome, oc.Error = "timeout", ctx.Err().Error()
	case timedOut: // the caller's context ended: tgrun interrupted, not the run too long
		oc.Outcome, oc.Error = "canceled", context.Cause(ctx).Error()
	case in.crashed:
		oc.Outcome, oc.Error = "crash", in.errText
	case in.failed:
		oc.Outcome, oc.Error = "failure", in.errText
	case err != nil:
		oc.Outcome, oc.Error = "exit", err.Error()
	case !in.ok:
		oc.Outcome, oc.Error = "incomplete", "exited without reporting success"
	default:
		oc.Outcome = "ok"
	}
	return oc
}
