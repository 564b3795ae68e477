// Package cli implements the p2pmsg command: one file per subcommand, each a
// thin shell over the public packages. Errors reach the user as a single
// line on stderr and a non-zero exit status.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/gologshim"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/p2pmsg/p2pmsg/internal/english"
	"github.com/p2pmsg/p2pmsg/internal/interrupt"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/jxtarel"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// Exit statuses.
const (
	ExitOK    = 0
	ExitError = 1 // the command failed
	ExitUsage = 2 // the command line was wrong
)

// exitError is an error with its own exit status, such as 128+N for a
// command cut short by signal N.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// interrupted returns the exit error of a command that ctx's signal cut
// short, nil if no signal ended ctx.
func interrupted(ctx context.Context, what error) error {
	if se, ok := interrupt.Cause(ctx); ok {
		return exitError{se.ExitCode(), fmt.Errorf("%v: %w", se, what)}
	}
	return nil
}

// exitOnSignal replaces *err, when a signal ended ctx (interrupt.Context),
// with the exit error that says so (128+N): deferred by commands that
// run until done or interrupted, whatever the signal cut short.
func exitOnSignal(ctx context.Context, err *error) {
	if *err != nil {
		if ie := interrupted(ctx, *err); ie != nil {
			*err = ie
		}
	}
}

// groupAnnotation marks a command below the root that only groups others
// (checkCommandLine).
const groupAnnotation = "p2pmsg/group"

// unknownSubcommand is the usage error for a group c given name, which is
// none of its subcommands, with cobra's suggestions as it gives them at
// the root.
func unknownSubcommand(c *cobra.Command, name string) error {
	err := fmt.Errorf("unknown command %q for %q", name, c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's default
	}
	if s := c.SuggestionsFor(name); len(s) > 0 {
		err = fmt.Errorf("%w\n\nDid you mean this?\n\t%s", err, strings.Join(s, "\n\t"))
	}
	return usageError{err}
}

// usageError marks errors in how the command was invoked: Main exits with
// ExitUsage for them, and for no other error. It decides by this type
// alone, never by an error's text, which may quote a peer (a refusal's
// reason) or a file.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

// Main runs the p2pmsg command with args and returns the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	quietLibp2p()
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err != nil && cmd == root {
		// The root runs nothing itself: an error of its own is cobra's,
		// finding no such subcommand.
		err = usageError{err}
	}
	if err == nil && cmd.Annotations[groupAnnotation] != "" && len(cmd.Flags().Args()) > 0 {
		// --help after an unknown subcommand of a group: its help
		// printed nothing (checkCommandLine).
		err = unknownSubcommand(cmd, cmd.Flags().Args()[0])
	}
	if err == nil {
		return ExitOK
	}
	line := shortError(err)
	var ue usageError
	if errors.As(err, &ue) {
		line = withoutPackages(line)
	}
	fmt.Fprintf(stderr, "p2pmsg: %s\n", line)
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.As(err, &ue) {
		return ExitUsage
	}
	return ExitError
}

// internalPackages are the packages under the commands whose errors name
// them, as Go errors do ("linkemu: unknown profile"): a command line's
// error says what is wrong in the command's terms, not where the check
// sits (withoutPackages).
var internalPackages = []string{"lab", "swarm", "linkemu", "encoding", "adaptive", "pathinfo", "codecbench", "datasets", "tgrun"}

// withoutPackages drops from an error line the parts that are only a
// package's name: "lab: invalid grid configuration: linkemu: unknown
// profile" reads "invalid grid configuration: unknown profile".
func withoutPackages(line string) string {
	parts := strings.Split(line, ": ")
	kept := parts[:0]
	for _, p := range parts {
		if !slices.Contains(internalPackages, p) {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, ": ")
}

// sentinelPackages are the packages whose own errors, sentinels such as
// node.ErrAddrInUse ("node: listen address in use"), can end any
// command's error chain; they name the package as Go errors do.
var sentinelPackages = append([]string{"node", "endpoint", "pipe", "socket", "adv", "id", "message", "wire", "jxtatcp", "jxtarel", "xmlc"}, internalPackages...)

// withoutSentinelPackages is s, err's text, with the package name dropped
// from the text of each error at the end of err's chain that one of
// sentinelPackages wrote: "node: listen address in use: /ip4/…" reads
// "listen address in use: /ip4/…". Only those errors' own text changes,
// never the text around them, which may quote a peer or a file.
func withoutSentinelPackages(err error, s string) string {
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		// An error of theirs that joins a sentinel with its causes
		// ("pipe: resolving …: the given peer could not be reached: …")
		// leads with its package too.
		s = withoutPackage(err, s)
		for _, e := range u.Unwrap() {
			if e != nil {
				s = withoutSentinelPackages(e, s)
			}
		}
		return s
	case interface{ Unwrap() error }:
		if e := u.Unwrap(); e != nil {
			return withoutSentinelPackages(e, s)
		}
	}
	return withoutPackage(err, s)
}

// withoutPackage is s with the package name dropped from err's text, if
// err's text is in s and leads with one of sentinelPackages.
func withoutPackage(err error, s string) string {
	text := err.Error()
	if pkg, rest, ok := strings.Cut(text, ": "); ok && slices.Contains(sentinelPackages, pkg) {
		return strings.Replace(s, text, rest, 1)
	}
	return s
}

// checkCommandLine makes cobra's own checks of the command line, for cmd
// and every command below it, fail with a usageError: its positional
// arguments (Args), its required flags and flag groups (checked before
// cobra checks them), and, for a command below the root that only groups
// others, an unknown subcommand, for which cobra printed the group's help
// and exited 0. Errors parsing flags are the root's FlagErrorFunc's; an
// unknown command at the root is Main's to mark, since cobra finds it
// before running anything.
func checkCommandLine(cmd *cobra.Command) {
	if cmd.HasParent() && cmd.HasSubCommands() && !cmd.Runnable() {
		group := cmd
		cmd.Args = cobra.ArbitraryArgs
		cmd.RunE = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return c.Help()
			}
			return unknownSubcommand(c, args[0])
		}
		// With --help, cobra prints the group's help for an unknown
		// subcommand ("lab layers --help") without running RunE: print
		// nothing then, and Main reports the unknown command.
		help := cmd.HelpFunc()
		cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
			if c == group && len(c.Flags().Args()) > 0 {
				return
			}
			help(c, args)
		})
		if cmd.Annotations == nil {
			cmd.Annotations = map[string]string{}
		}
		cmd.Annotations[groupAnnotation] = "true"
	}
	if args := cmd.Args; args != nil {
		cmd.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	if cmd.Runnable() && cmd.PreRunE == nil && cmd.PreRun == nil {
		cmd.PreRunE = func(c *cobra.Command, _ []string) error {
			if err := c.ValidateRequiredFlags(); err != nil {
				return usageError{err}
			}
			if err := c.ValidateFlagGroups(); err != nil {
				return usageError{err}
			}
			return finiteFloats(c)
		}
	}
	for _, sub := range cmd.Commands() {
		checkCommandLine(sub)
	}
}

// finiteFloats refuses NaN and infinite values of c's float flags, which
// pflag parses but no flag of ours means: range checks such as "load in
// (0, 1]" let NaN through, as every comparison with it is false.
func finiteFloats(c *cobra.Command) (err error) {
	c.Flags().Visit(func(f *pflag.Flag) {
		if f.Value.Type() != "float64" || err != nil {
			return
		}
		if v, perr := strconv.ParseFloat(f.Value.String(), 64); perr == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			err = usageError{fmt.Errorf("--%s %q: want a finite number", f.Name, f.Value.String())}
		}
	})
	return err
}

// maxErrorLine bounds the error line after its cause: the cause comes
// first, and the chain of what was being done is cut at about two lines
// of a terminal.
const maxErrorLine = 160

// shortError is err as one line that leads with its root cause when one
// is recognised (a refused or reset connection, an unreachable host or
// peer, a timeout, a peer with another identity than expected, a stream
// the peer reset or ended with data missing, a peer gone), followed by
// what was being done, cut to maxErrorLine.
func shortError(err error) string {
	s := oneLine(withoutSentinelPackages(err, err.Error()))
	if r := refusal(err); r != "" {
		return r
	}
	var errno syscall.Errno
	var reset *network.StreamError
	cause := ""
	switch {
	case errors.Is(err, jxtarel.ErrUnreachable):
		cause = "the peer can no longer be reached"
	case errors.Is(err, jxtarel.ErrTimeout):
		cause = "the peer stopped acknowledging"
	case errors.Is(err, jxtarel.ErrIncomplete):
		cause = "the peer ended its stream with data missing"
	case errors.As(err, &errno):
		cause = errno.Error()
	case errors.Is(err, context.DeadlineExceeded):
		cause = "timed out"
	case strings.Contains(s, "peer id mismatch"):
		cause = "the peer at that address has another peer ID"
	case errors.As(err, &reset) && reset.Remote:
		cause = "the peer reset the stream"
	case errors.Is(err, pipe.ErrPeerGone), errors.Is(err, endpoint.ErrPeerGone):
		// The receiver closed or shut down (it asks its senders to end
		// their streams first), restarted, or its connection was lost.
		cause = "the peer went away"
	}
	if cause == "" {
		return s
	}
	// A chain that ends in the cause (a file's "open x: no such file or
	// directory") says it once, first.
	return cause + ": " + cutLine(strings.TrimSuffix(s, ": "+cause), maxErrorLine)
}

// cutLine cuts s to at most n bytes and an ellipsis: after a word if one
// ends in the last quarter of the n bytes (a word cut in two reads as a
// typo), else on a rune boundary (a long URN or address).
func cutLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if i := strings.LastIndexByte(s[:n+1], ' '); i >= n*3/4 {
		return strings.TrimRight(s[:i], ",;:") + " …"
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// refusal is the error line of messages the receiving peer refused with a
// reason (a key or model it lacks, a policy): the refusal and the reason
// first, then how many were not delivered, without the pipe's and peer's
// IDs the command line gave. It is "" for any other error, and for one a
// signal cut short, which leads with the signal.
func refusal(err error) string {
	var ee exitError
	var ud *pipe.UndeliveredError
	if errors.As(err, &ee) || !errors.As(err, &ud) || len(ud.Refusals) == 0 {
		return ""
	}
	r := ud.Refusals[len(ud.Refusals)-1]
	if r.Reason == "" {
		return ""
	}
	return fmt.Sprintf("refused by the receiver: %s (%s not delivered)", cutLine(oneLine(r.Reason), maxErrorLine), english.Count(ud.Count, "message", "messages"))
}

// quietLibp2p keeps go-libp2p's own log lines off stderr, which carries
// the command's messages and errors, one line each: libp2p logs benign
// events at error level (a circuit listener closed at shutdown, "swarm
// listener accept error"), and what matters reaches the command as an
// error anyway. GOLOG_LOG_LEVEL, libp2p's own switch, turns them back on.
// It must run before the first libp2p log line.
func quietLibp2p() {
	if os.Getenv("GOLOG_LOG_LEVEL") == "" {
		gologshim.SetDefaultHandler(slog.DiscardHandler)
	}
}

// flagWants says, by a flag's value type, what a value of it is.
var flagWants = map[string]string{
	"int": "an integer", "int64": "an integer",
	"uint32": "an integer of 0 or more", "uint64": "an integer of 0 or more",
	"float64":  "a number",
	"duration": "a duration with its unit, such as 500ms or 2m",
	"bool":     "true or false",
}

// flagValueError is err, pflag's error for a value a flag cannot parse,
// as a short line that leads with the flag and the value and says what
// the flag takes, without the parser's own names ("invalid argument "x"
// for "--count" flag: strconv.ParseInt: parsing "x": invalid syntax"
// becomes `--count "x": want an integer`). Other errors are left as
// they are.
func flagValueError(err error) error {
	var iv *pflag.InvalidValueError
	if !errors.As(err, &iv) {
		return err
	}
	what := "--" + iv.GetFlag().Name + " " + strconv.Quote(iv.GetValue())
	var num *strconv.NumError
	switch want, ok := flagWants[iv.GetFlag().Value.Type()]; {
	case errors.As(err, &num) && errors.Is(num.Err, strconv.ErrRange):
		return fmt.Errorf("%s: %w", what, strconv.ErrRange)
	case ok:
		return fmt.Errorf("%s: want %s", what, want)
	}
	return fmt.Errorf("%s: %w", what, errors.Unwrap(err))
}

// oneLine folds s, an error or a message that may quote text from the
// network, into one printable line.
func oneLine(s string) string {
	return printableLine(strings.Join(strings.Fields(s), " "))
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "p2pmsg",
		Short: "Peer-to-peer messaging in the JXTA model, on libp2p",
		Long: `p2pmsg reimplements JXTA's endpoint, pipe and socket layers on libp2p.

It sends and receives messages on pipes between peers (send, recv), pipes
bytes over sockets like nc (send --socket, recv --socket), encodes and decodes
JXTA binary messages (application/x-jxta-msg) and pipe advertisements
interoperably with JXSE 2.7, compresses and encrypts elements (codec), and
runs the project's experiments (lab). It also speaks JXTA's own TCP transport,
so JXSE 2.7 peers send and receive on its pipes (recv --jxta, send --peer
tcp://…), and bridges a pipe between JXSE peers and libp2p peers (bridge).`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{flagValueError(err)} })
	root.SetHelpCommand(newHelpCmd())
	root.AddCommand(newIDCmd(), newSendCmd(), newRecvCmd(), newBridgeCmd(), newMsgCmd(), newAdvCmd(), newCodecCmd(), newLabCmd())
	// cobra adds its completion command when it runs, after
	// checkCommandLine: added now, it is checked as the others are.
	root.InitDefaultCompletionCmd()
	checkCommandLine(root)
	return root
}

// newHelpCmd is cobra's help command, except that a path naming no command
// is a usage error, as it is with --help ("lab layers --help"): cobra's
// own printed the nearest group's help for "help lab layers", and its
// usage for "help nosuch", and exited 0.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long: `Help prints the help of any command.
Type p2pmsg help [path to command] for full details.`,
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil {
				return usageError{err}
			}
			if len(rest) > 0 {
				return unknownSubcommand(cmd, rest[0])
			}
			cmd.InitDefaultHelpFlag() // so that its help lists -h
			return cmd.Help()
		},
	}
}
