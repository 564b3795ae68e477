package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/p2pmsg/p2pmsg/internal/interrupt"
	"github.com/p2pmsg/p2pmsg/internal/lab"
	"github.com/p2pmsg/p2pmsg/internal/provenance"
)

// labLayers are the layers `lab rtt` can measure, by name; the JXTA ones
// share j's live JXSE peers.
func labLayers(j *lab.JXSE) map[string]lab.Layer {
	m := map[string]lab.Layer{
		"tcp":      lab.TCPLayer{},
		"stream":   lab.StreamLayer{NewHost: lab.NodeHost},
		"endpoint": lab.EndpointLayer{},
		"pipe":     lab.PipeLayer{},
		"socket":   lab.SocketLayer{},
	}
	for _, k := range []string{lab.JXTAEndpoint, lab.JXTAPipe, lab.JXTASocket} {
		m["jxta-"+k] = lab.JXTALayer{Kind: k, JXSE: j}
		m["jxse-"+k] = lab.JXSEReferenceLayer{Kind: k, JXSE: j}
	}
	return m
}

func newLabCmd() *cobra.Command {
	var cpuProfile string
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Run p2pmsg's experiments on this machine",
	}
	cmd.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof reads it)")
	cmd.AddCommand(newLabRTTCmd(), newLabCodecsCmd())
	cmd.AddCommand(newLabAMTTCmd())
	cmd.AddCommand(newLabGridCmd())
	cmd.AddCommand(newLabRateCmd())
	cmd.AddCommand(newLabSwarmCmd())
	cmd.AddCommand(newLabDocsCmd())
	for _, sub := range cmd.Commands() {
		if run := sub.RunE; run != nil {
			sub.RunE = func(c *cobra.Command, args []string) error {
				return profiled(cpuProfile, func() error { return run(c, args) })
			}
		}
	}
	return cmd
}

// profiled runs a lab command under a CPU profile written to file ("":
// none). A CPU profile of an experiment is how one finds where its time
// goes (the rate and swarm cases are CPU-bound on small machines); it
// covers the whole command, setup included, and is written however the
// command ends: a run that failed or was interrupted is where a profile
// is most wanted (cobra's PersistentPostRunE, which wrote it before, runs
// only after a command that succeeded, and left the file empty). A
// command refused for its command line ran nothing: its file is removed.
func profiled(file string, run func() error) error {
	if file == "" {
		return run()
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		os.Remove(file)
		return err
	}
	err = run()
	pprof.StopCPUProfile()
	cerr := f.Close()
	var ue usageError
	if errors.As(err, &ue) {
		os.Remove(file)
		return err
	}
	if err != nil {
		return err
	}
	return cerr
}

func newLabRTTCmd() *cobra.Command {
	var (
		layers, sizes, transport, baseline, out string
		asJSON                                  bool
		warmup, runs, pairs                     int
	)
	cmd := &cobra.Command{
		Use:   "rtt",
		Short: "Round-trip time and bandwidth per layer, on loopback",
		Long: `Measure message/echo round trips between two real nodes in this process,
following the JXTA layer study (Jan & Noblet): a warm-up of --warmup pairs
per layer, then for each payload size --runs rounds in which every layer makes
one run of --pairs consecutive pairs, in an order shuffled each round, so
that the layers are measured side by side under the same load. The paper
timed 5 runs of 100 pairs (--runs 5 --pairs 100); the default's many short
runs keep a CPU stolen for a few milliseconds from skewing a layer. The
endpoint, pipe and socket layers share one pair of nodes. Each row
is the median run: RTT, latency = RTT/2, bandwidth = 2·size/RTT, and the
bytes the layer writes per message beyond the payload. With --baseline, each
row also gives the median over rounds of the layer's run time divided by the
baseline's in the same round, the steadier figure for a ratio between layers
(bandwidth ratios are its inverse).

Layers: ` + strings.Join(lab.LayerNames(labLayers(nil)), ", ") + ` (tcp is raw TCP with TCP_NODELAY,
stream a raw libp2p stream with a 4-byte length prefix between hosts
configured as p2pmsg nodes, endpoint the endpoint service, pipe a unicast
output pipe to an input pipe that echoes through a second pipe, socket a
socket connection echoing every byte).

The jxta-* layers measure p2pmsg with a live, unmodified JXSE 2.7 peer on
JXTA's own TCP transport (signed, as JXSE signs by default), echoing at its
endpoint, pipe or JxtaServerSocket; jxse-* measure a second JXSE peer to the
same echoes, the JXSE-to-JXSE reference, timed in its JVM. They need Java
and Maven (the JXSE jars are fetched once); payloads go to JXSE as text.

  p2pmsg lab rtt --layer jxta-endpoint,jxse-endpoint,jxta-pipe,jxse-pipe,jxta-socket,jxse-socket --sizes 1,1K,64K --warmup 200`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			start := provenance.Begin()
			jx := &lab.JXSE{}
			defer jx.Close()
			known := labLayers(jx)
			var chosen []lab.Layer
			for _, name := range strings.Split(layers, ",") {
				name = strings.TrimSpace(name)
				l, ok := known[name]
				if !ok {
					return usageError{fmt.Errorf("unknown layer %q (have %s)", name, strings.Join(lab.LayerNames(known), ", "))}
				}
				if slices.ContainsFunc(chosen, func(c lab.Layer) bool { return c.Name() == name }) {
					return usageError{fmt.Errorf("layer %q given twice", name)}
				}
				chosen = append(chosen, l)
			}
			sz, err := lab.ParseSizes(sizes)
			if err != nil {
				return usageError{fmt.Errorf("--sizes: %w", err)}
			}
			if err := lab.CheckTransport(transport); err != nil {
				return usageError{err}
			}
			if warmup < 0 || runs < 1 || pairs < 1 {
				return usageError{fmt.Errorf("--warmup must be >= 0, --runs and --pairs >= 1")}
			}
			w := warmup
			if w == 0 {
				w = -1 // RTTConfig reads 0 as "the default" and negative as none
			}
			ctx, finish, err := measuring(cmd, out)
			if err != nil {
				return err
			}
			defer finish(&err)
			res, err := lab.RunRTT(ctx, lab.RTTConfig{
				Layers: chosen, Sizes: sz, Transport: transport,
				Warmup: w, Runs: runs, Pairs: pairs, Baseline: baseline,
				Progress: cmd.ErrOrStderr(),
			})
			if errors.Is(err, lab.ErrUnknownLayer) {
				return usageError{err} // a --baseline outside --layer, refused before any run
			}
			if err != nil {
				return err
			}
			return writeRows(cmd, res, asJSON, func(w io.Writer, res []lab.RTTResult) error {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
				head := "layer\ttransport\tsize\tRTT\tlatency\tbandwidth\twire bytes\t"
				if baseline != "" {
					head += "RTT ×" + baseline + "\t"
				}
				fmt.Fprintln(tw, head)
				for _, r := range res {
					wire := strconv.Itoa(r.WireBytes)
					if r.WireBytes == 0 && strings.HasPrefix(r.Layer, "jx") {
						wire = "n/a" // not measured on JXTA's transport
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%v\t%s\t%s\t", r.Layer, r.Transport, lab.FormatSize(r.Size),
						r.RTT, r.Latency, formatRate(r.Bandwidth), wire)
					if baseline != "" {
						fmt.Fprintf(tw, "%.3f\t", r.Ratio)
					}
					fmt.Fprintln(tw)
				}
				return tw.Flush()
			}, out, "rtt", start)
		},
	}
	f := cmd.Flags()
	f.StringVar(&layers, "layer", "tcp,stream,endpoint", "comma-separated layers to measure")
	f.StringVar(&sizes, "sizes", "1,64,512,1K,4K,16K,64K,128K,512K,1M,4M,16M", "comma-separated payload sizes (K, M suffixes)")
	f.StringVar(&transport, "transport", lab.TransportTCP, "libp2p transport: tcp or quic")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per line")
	f.StringVar(&out, "out", "", outUsage("rtt"))
	f.IntVar(&warmup, "warmup", 1000, "message/echo pairs before measuring")
	f.IntVar(&runs, "runs", lab.DefaultRuns, "timed runs per size")
	f.IntVar(&pairs, "pairs", lab.DefaultPairs, "consecutive pairs per run")
	f.StringVar(&baseline, "baseline", "", "a layer of --layer: also print each layer's RTT over it, the median of the ratios of runs made in the same round")
	return cmd
}

func formatRate(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.2f GB/s", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.1f MB/s", bps/1e6)
	case bps >= 1e3:
		return fmt.Sprintf("%.1f kB/s", bps/1e3)
	}
	return fmt.Sprintf("%.0f B/s", bps)
}

// positiveFlags refuses, as a usage error, any of the named int, float64
// or duration flags given on the command line with a value of zero or
// less. The lab's configurations read zero as "the default", so without
// this a user who typed --rate 0 would get the default rate, silently,
// and a run of minutes.
func positiveFlags(cmd *cobra.Command, names ...string) error {
	for _, name := range names {
		f := cmd.Flags().Lookup(name)
		if f == nil || !f.Changed {
			continue
		}
		var v float64
		switch f.Value.Type() {
		case "duration":
			d, err := time.ParseDuration(f.Value.String())
			if err != nil {
				return usageError{fmt.Errorf("--%s: %w", name, err)}
			}
			v = float64(d)
		default:
			n, err := strconv.ParseFloat(f.Value.String(), 64)
			if err != nil {
				return usageError{fmt.Errorf("--%s: %w", name, err)}
			}
			v = n
		}
		if v <= 0 {
			return usageError{fmt.Errorf("--%s must be more than 0, not %s", name, f.Value.String())}
		}
	}
	return nil
}

// prepareOutDir creates a lab command's --out directory (if dir is not
// empty) and makes sure a file can be created in it, before the command
// measures anything: a directory that cannot be written (a file in the
// way, no permission) fails the command at once, not after a run of
// minutes or hours whose results it would then not print. The command
// calls undo when it fails: it removes the directories prepareOutDir
// made, if they are still empty, so that a failed run leaves nothing
// behind.
func prepareOutDir(dir string) (undo func(), err error) {
	undo = func() {}
	if dir == "" {
		return undo, nil
	}
	// The first missing directory of dir's path: the one to remove.
	made := ""
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		made = d
		if filepath.Dir(d) == d {
			break
		}
	}
	if made != "" {
		undo = func() { removeEmptyDirs(filepath.Clean(dir), made) }
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		undo()
		return func() {}, fmt.Errorf("--out: %w", err)
	}
	f, err := os.CreateTemp(dir, ".p2pmsg-out-*")
	if err != nil {
		undo()
		return func() {}, fmt.Errorf("--out: %w", err)
	}
	f.Close()
	if err := os.Remove(f.Name()); err != nil {
		undo()
		return func() {}, fmt.Errorf("--out: %w", err)
	}
	return undo, nil
}

// measuring starts a lab command's run: it prepares the --out directory
// out (prepareOutDir) and the context a SIGINT, SIGTERM or SIGHUP ends. The
// command defers finish(&err), which makes an interrupted run's error say
// so (exitOnSignal), and a failed run remove what prepareOutDir made.
func measuring(cmd *cobra.Command, out string) (ctx context.Context, finish func(*error), err error) {
	undo, err := prepareOutDir(out)
	if err != nil {
		return nil, nil, err
	}
	ctx, stop := interrupt.Context(cmd.Context())
	return ctx, func(err *error) {
		exitOnSignal(ctx, err)
		stop()
		undoOnFailure(err, undo)
	}, nil
}

// undoOnFailure calls undo if the command failed (*err set), for a
// deferred call registered before exitOnSignal's, which sets *err on an
// interrupt.
func undoOnFailure(err *error, undo func()) {
	if *err != nil {
		undo()
	}
}

// removeEmptyDirs removes dir and its parents up to top, each only if it
// is empty (os.Remove refuses a directory that is not).
func removeEmptyDirs(dir, top string) {
	for d := dir; ; d = filepath.Dir(d) {
		if os.Remove(d) != nil || d == top || filepath.Dir(d) == d {
			return
		}
	}
}
