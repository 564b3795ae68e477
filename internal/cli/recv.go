package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/p2pmsg/p2pmsg/internal/english"
	"github.com/p2pmsg/p2pmsg/internal/interrupt"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pathinfo"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

// drainTimeout bounds how long recv waits, once done, for its senders to
// finish their streams and read their ends.
const drainTimeout = 2 * time.Second

func newRecvCmd() *cobra.Command {
	var (
		advFile, keyFile, outDir, pskFile string
		jxtaListen, jxtaPublic            string
		listen, dicts, models             []string
		asJSON, useSocket, jxtaUnsigned   bool
		count                             int
	)
	cmd := &cobra.Command{
		Use:   "recv --pipe ADV.xml",
		Short: "Bind a pipe and print the messages that arrive (or accept a socket)",
		Long: `Bind the pipe of an advertisement on this peer and print every message sent
to it. First, each of the peer's full multiaddrs is printed on stderr as a
line "listening <multiaddr>": give one to ` + "`p2pmsg send --peer`" + `.

Messages are printed readably (text elements as text), or with --json one
line per message in the ` + "`p2pmsg msg decode`" + ` schema; --out DIR also writes
each element to a file. Encoded elements (see ` + "`send --encode`" + `) are decoded
first: sealed ones with this peer's identity, or with --psk; those encoded
with a trained model (send --model) with the --model file of its ID
(the built-in models, such as xml@employees, need no file). A
message that does not decode is refused back to its sender with the reason
(naming the model's ID when it is a model this peer lacks).

With --psk, recv takes only what the key vouches for: a message is refused
back to its sender unless every element arrived sealed with that key, in
any namespace, JXTA's included, and at least one did. JXTA's endpoint
address headers (jxta:EndpointSourceAddress, EndpointDestinationAddress),
which no sender can seal, are neither required sealed nor printed.

With --socket, accept one socket connection on the pipe instead, copy it
to stdout, and exit at its end.

With --jxta tcp://ADDR:PORT the peer is also a JXTA peer on JXTA's own TCP
transport, listening there: JXSE 2.7 peers resolve the pipe (a unicast
pipe) and send on it as they would to another JXSE peer; their messages are
printed alike, from their JXTA peer ID. It signs and requires signed
messages as JXSE does by default; --jxta-unsigned is for JXSE peers started
with CBJX disabled. A mismatch is counted on stderr, at most every 10 s,
naming the flag: the unsigned messages a signing peer drops, or the signed
ones a --jxta-unsigned peer gets (their senders most likely drop its
answers). A sender it took unsigned is printed as unverified. Its JXTA
identity is kept in KEY.jxta (p2pmsg id). Its JXTA addresses are printed
as "listening jxta ADDR ID"; behind NAT or a port forward, --jxta-public
tcp://HOST:PORT is the address JXSE peers are told to reach it at instead
(printed "announcing jxta ADDR ID").
With --socket it accepts a JXSE peer's JxtaSocket as well.`,
		Example: `  p2pmsg adv new --type unicast --name chat > chat.xml
  p2pmsg recv --pipe chat.xml --listen /ip4/127.0.0.1/tcp/9701 --count 1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if count < 0 {
				return usageError{errors.New("--count must be >= 0")}
			}
			if useSocket && (asJSON || outDir != "" || count != 0) {
				return usageError{errors.New("--socket copies bytes: --json, --out and --count do not apply")}
			}
			if err := checkListen(listen); err != nil {
				return err
			}
			a, err := readAdvFile(advFile, cmd.InOrStdin())
			if err != nil {
				return err
			}
			if keyFile, err = identityFile(keyFile); err != nil {
				return err
			}
			var keys codecKeys
			if err := keys.load(pskFile, dicts, models); err != nil {
				return err
			}
			if jxtaListen == "" {
				if err := jxtaOnly(cmd, "jxta-unsigned", "jxta-public"); err != nil {
					return err
				}
			}
			if jxtaLen := jxtaListen; jxtaLen != "" {
				if err := checkJXTATCP("--jxta", jxtaLen, true, false); err != nil {
					return err
				}
				if err := checkJXTAPublic(jxtaPublic); err != nil {
					return err
				}
				if a.Type != adv.Unicast {
					return usageError{fmt.Errorf("--jxta: only unicast pipes are shared with JXTA peers (this one is %s)", a.Type)}
				}
			}
			ctx, stop := interrupt.Context(cmd.Context())
			defer stop()
			p, err := startPeer(ctx, keyFile, listen, jxtaConfig{on: jxtaListen != "", listen: jxtaListen, public: jxtaPublic, unsigned: jxtaUnsigned})
			if err != nil {
				return err
			}
			defer p.Close()
			defer watchUnsigned(p, cmd.ErrOrStderr())()
			// Made once the node listens, so that a recv that cannot
			// start (a wrong command line, a port in use) leaves no
			// directory behind; no message arrives before the input pipe
			// is bound, below.
			first := 1 // the number of the first message: its files' names
			if outDir != "" {
				if err := os.MkdirAll(outDir, 0o755); err != nil {
					return err
				}
				if first, err = nextMessageNumber(outDir); err != nil {
					return err
				}
			}
			keys.identity = p.key
			if useSocket {
				return recvSocket(ctx, cmd, p, a)
			}
			reg, err := keys.registry()
			if err != nil {
				return err
			}
			// The receiver times its decodes into the models kept beside
			// its identity and serves them, as its decode profile, to
			// senders choosing with --encode auto (pathinfo), which may
			// also probe the path from this end.
			models, saveModels := loadModels(keyFile, cmd.ErrOrStderr())
			defer saveModels()
			decOpts := []encoding.Option{encoding.WithRegistry(reg), encoding.WithPipeID(a.ID.String()), models.TimeDecodes()}
			if keys.psk != nil {
				// With a pre-shared key, recv delivers only what the key
				// vouches for: every element but the endpoint's address
				// headers comes sealed with it, and a message with none
				// sealed is refused.
				decOpts = append(decOpts, encoding.WithSealedOnly(endpointHeaders{}, keys.pskKeyIDs()...))
			}
			dec, err := encoding.NewDecoder(decOpts...)
			if err != nil {
				return err
			}
			// The profile the first sender to ask gets covers this end's
			// codecs (those it decoded none of yet measured then):
			// measuring builds every codec's encoder, and most receivers
			// are asked by no sender, or only once their models file
			// knows them.
			calib, err := calibrationRegistry(reg)
			if err != nil {
				return err
			}
			measure := func() { models.CalibrateDecode(calib); calib = nil }
			info, err := pathinfo.New(calibratingHost{p.node.Host(), new(sync.Once), measure}, models)
			if err != nil {
				return err
			}
			defer info.Close()
			// Messages are decoded as they are handed over, on the
			// connection's reader, so that one this peer cannot decode (a
			// key or model it lacks, a policy it enforces) is refused back
			// to its sender, whose Flush then fails with the reason, rather
			// than counted delivered. What decodes waits for the printer,
			// and until it is printed (and written under --out): one this
			// peer could not print or write (a full disk, a closed stdout)
			// is refused too, not acknowledged and then lost.
			type decoded struct {
				r       *pipe.Received
				m       *message.Message
				reps    []encoding.ElementReport
				printed chan error // the printer's result, buffered
			}
			got, done := make(chan decoded), make(chan struct{})
			var decMu sync.Mutex
			refusals := newRepeats(cmd.ErrOrStderr())
			defer refusals.flush() // after the input pipe's Close: no handler runs then
			handler := func(r *pipe.Received) {
				decMu.Lock()
				m, reps, err := dec.DecodeReport(r.Message)
				decMu.Unlock()
				if err != nil {
					// One bad message (any peer can send one) does not
					// stop a receiver; it is refused, reported and skipped.
					r.Refuse("not decoded: " + err.Error())
					key, of := lineKey(r)
					refusals.lineOf(key, of, fmt.Sprintf("p2pmsg: message from %s refused: %s", sender(r), oneLine(err.Error())))
					r.Release()
					return
				}
				d := decoded{r, m, reps, make(chan error, 1)}
				select {
				case got <- d:
					if err := <-d.printed; err != nil {
						// The cause, without this peer's paths.
						var pe *fs.PathError
						if errors.As(err, &pe) {
							err = pe.Err
						}
						r.Refuse("the receiver could not print or write it: " + err.Error())
					}
				case <-done:
					r.Refuse("the receiver has stopped")
				}
				r.Release()
			}
			in, err := p.pipes.NewInputPipe(a, pipe.WithHandler(handler))
			if err != nil {
				return err
			}
			defer in.Close()
			announce(cmd, p)
			out := cmd.OutOrStdout()
			err = func() error {
				defer close(done)
				for n := 1; count == 0 || n <= count; n++ {
					var d decoded
					select {
					case d = <-got:
					case <-ctx.Done():
						if cmd.Context().Err() != nil {
							return ctx.Err()
						}
						if count > 0 {
							// Fewer messages than asked for: not a success
							// for a script that waits for count of them.
							return interrupted(ctx, fmt.Errorf("%d of %d messages received", n-1, count))
						}
						return nil // run until interrupted: a normal way to stop
					}
					err := printDecoded(out, outDir, asJSON, first+n-1, d.r, d.m, d.reps)
					d.printed <- err // the handler releases d.r
					if err != nil {
						return err
					}
				}
				return nil
			}()
			if err != nil && ctx.Err() == nil {
				// The refusal of the message it could not print or write
				// travels back on its sender's stream: closing at once
				// could reset the stream before it is written.
				drain(ctx, p)
				return err
			}
			if err != nil || ctx.Err() != nil {
				return err
			}
			return drain(ctx, p)
		},
	}
	f := cmd.Flags()
	f.StringVar(&advFile, "pipe", "", "pipe advertisement file (required)")
	f.StringArrayVar(&listen, "listen", []string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"}, "multiaddr to listen on (repeatable)")
	f.StringVar(&keyFile, "key", "", "identity key file (default: p2pmsg/identity.key in the user configuration directory)")
	f.BoolVar(&asJSON, "json", false, "print each message as one line of JSON")
	f.StringVar(&outDir, "out", "", "also write each element to a file in this directory, MESSAGE-ELEMENT-NAME, numbering on from the last message there")
	f.IntVar(&count, "count", 0, "exit after this many messages, 130, 143 or 129 if SIGINT, SIGTERM or SIGHUP comes first (0: run until interrupted, then exit 0)")
	f.BoolVar(&useSocket, "socket", false, "accept one socket connection and copy it to stdout")
	f.StringVar(&pskFile, "psk", "", "pre-shared key file for sealed elements (32 bytes, raw or hex)")
	f.StringArrayVar(&dicts, "dict", nil, "zstd dictionary file for encoded elements (repeatable)")
	f.StringArrayVar(&models, "model", nil, modelUsage)
	f.StringVar(&jxtaListen, "jxta", "", "also be a JXTA peer listening at tcp://ADDR:PORT (JXSE 2.7 peers send on the pipe)")
	f.BoolVar(&jxtaUnsigned, "jxta-unsigned", false, "with --jxta: neither sign nor require signed messages (JXSE with CBJX disabled)")
	f.StringVar(&jxtaPublic, "jxta-public", "", jxtaPublicUsage)
	return cmd
}

// printDecoded prints message n (and writes its elements under outDir).
func printDecoded(out io.Writer, outDir string, asJSON bool, n int, r *pipe.Received, m *message.Message, reps []encoding.ElementReport) error {
	if outDir != "" {
		if err := writeElements(outDir, n, m); err != nil {
			return err
		}
	}
	if asJSON {
		var js bytes.Buffer
		enc := json.NewEncoder(&js)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(reportJSON(toJSON(m), reps)); err != nil {
			return err
		}
		_, err := out.Write(jsonSafe(js.Bytes()))
		return err
	}
	return printMessage(out, n, r, m, reps)
}

// announce prints the peer's full multiaddrs on stderr, and as a JXTA
// peer its TCP addresses and peer ID.
func announce(cmd *cobra.Command, p *peerStack) {
	for _, a := range p.node.Addrs() {
		fmt.Fprintf(cmd.ErrOrStderr(), "listening %s\n", a)
	}
	if t := p.ep.JXTA(); t != nil {
		addrs := t.Addrs()
		for _, a := range addrs {
			fmt.Fprintf(cmd.ErrOrStderr(), "listening jxta %s %s\n", a, t.ID())
		}
		if pub := t.AnnouncedAddrs(); len(pub) > 0 && !slices.Contains(addrs, pub[0]) {
			fmt.Fprintf(cmd.ErrOrStderr(), "announcing jxta %s %s\n", pub[0], t.ID())
		}
	}
}

// socketPeer names a socket's peer: its libp2p peer ID, or a JXTA peer's
// JXTA peer ID.
func socketPeer(c *socket.Conn) string {
	if j := c.RemoteAddr().(socket.Addr).JXTAPeer; !j.IsZero() {
		return j.String() + " (jxta)"
	}
	return c.RemotePeer().String()
}

// lineKey is whom the lines recv and bridge write about r's message are
// counted against (repeats), and how a count names them: its sender, or,
// for a JXTA sender that nothing signed, the host it came from. Such a
// sender's peer ID is only its claim, which it can change with every
// message: keyed by it, a peer's messages on one connection each had a
// line (TestRecvUnverifiedRefusalsCollapsed).
func lineKey(r *pipe.Received) (key, of string) {
	if r.From == "" && r.Unverified {
		return "unverified JXTA peers at " + r.RemoteHost.String(), "unverified JXTA peers at its host"
	}
	return sender(r), "this peer"
}

// sender names a message's sender: its libp2p peer ID, or a JXTA peer's
// JXTA peer ID, said to be unverified when nothing signed it.
func sender(r *pipe.Received) string {
	if r.From == "" && r.Unverified {
		return r.FromJXTA.String() + " (jxta, unsigned: unverified)"
	}
	if r.From == "" {
		return r.FromJXTA.String() + " (jxta)"
	}
	return r.From.String()
}

func recvSocket(ctx context.Context, cmd *cobra.Command, p *peerStack, a *adv.PipeAdvertisement) error {
	l, err := p.sockets.Listen(a)
	if err != nil {
		return err
	}
	defer l.Close()
	announce(cmd, p)
	c, err := l.AcceptContext(ctx)
	if err != nil {
		if ie := interrupted(ctx, errors.New("no socket connection came")); ie != nil {
			return ie
		}
		return err
	}
	defer c.Close()
	// Only a stream its sender ended cleanly is a success: output cut
	// short by a signal or an error must not look complete.
	if n, err := copyUntilSignal(ctx, cmd.OutOrStdout(), c); err != nil {
		if ie := interrupted(ctx, fmt.Errorf("socket from %s cut short after %d bytes", socketPeer(c), n)); ie != nil {
			return ie
		}
		return fmt.Errorf("socket from %s: %w", socketPeer(c), err)
	}
	// Closing tells the sender that everything arrived; exiting before it
	// has read that could reset the connection under the close and make
	// the sender fail, so the node closes once its peers have read what
	// it wrote (a JXTA peer's close has been answered already).
	if err := c.Close(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, drainTimeout)
	defer cancel()
	p.node.Shutdown(ctx)
	return nil
}

// copyUntilSignal copies c to out until c ends or ctx does. When ctx
// ends (a signal), it resets c rather than closing it, since a close
// tells the sender that everything it sent was read, and one whose input
// has ended would take it for that and succeed; then it returns at once
// if a write to out is under way, and otherwise once the copy has ended
// (the reset ends a read). A write to a pipe nobody reads never returns,
// and no deadline or close reaches a blocking file such as stdout: that
// write is abandoned, its goroutine left for the process's exit, so that
// the signal still ends the command. It returns the bytes written to out.
func copyUntilSignal(ctx context.Context, out io.Writer, c *socket.Conn) (int64, error) {
	w := &signalWriter{ctx: ctx, w: out}
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(w, c)
		done <- err
	}()
	select {
	case err := <-done:
		return w.n.Load(), err
	case <-ctx.Done():
	}
	c.Reset()
	if !w.writing.Load() {
		<-done
	}
	return w.n.Load(), context.Cause(ctx)
}

// signalWriter writes to w until ctx ends, counting the bytes written
// and saying whether a write is under way (copyUntilSignal).
type signalWriter struct {
	ctx     context.Context
	w       io.Writer
	n       atomic.Int64
	writing atomic.Bool
}

func (s *signalWriter) Write(p []byte) (int, error) {
	// Set before ctx is checked: once ctx has ended, copyUntilSignal,
	// finding writing false, is sure that no write to w will start.
	s.writing.Store(true)
	defer s.writing.Store(false)
	if s.ctx.Err() != nil {
		return 0, context.Cause(s.ctx)
	}
	n, err := s.w.Write(p)
	s.n.Add(int64(n))
	return n, err
}

// drain ends p as a receiver that is done, so that its senders see their
// last messages delivered, all within drainTimeout: the endpoint's
// Shutdown waits for each sender to end its stream and ends it cleanly
// (a sender's Flush waits for that), and the node's closes each
// connection once its peer has read that end, which exiting under it
// would turn into a reset. A peer that does not answer in time is not
// waited for: what this side received is complete, and that sender's own
// exit says what it saw.
func drain(ctx context.Context, p *peerStack) error {
	ctx, cancel := context.WithTimeout(ctx, drainTimeout)
	defer cancel()
	if err := p.ep.Shutdown(ctx); err != nil {
		return err
	}
	p.node.Shutdown(ctx)
	return nil
}

// printMessage writes a message readably: text elements as text, others
// as their size.
// reportJSON adds to j how each element was decoded, and its sizes.
func reportJSON(j jsonMessage, reps []encoding.ElementReport) jsonMessage {
	for _, rep := range reps {
		if rep.Index < len(j.Elements) && len(rep.Chain) > 0 {
			e := &j.Elements[rep.Index]
			e.Codecs, e.Key, e.WireSize, e.Size = rep.Chain, rep.KeyID, rep.WireSize, rep.Size
		}
	}
	return j
}

// decodedAs says how an element was decoded, for printMessage: "" for an
// element that arrived plain.
func decodedAs(reps []encoding.ElementReport, i int) string {
	for _, rep := range reps {
		if rep.Index != i || len(rep.Chain) == 0 {
			continue
		}
		s := ", " + strings.Join(rep.Chain, "+")
		if rep.KeyID != "" {
			s += " key " + rep.KeyID
		}
		s += fmt.Sprintf(", %d bytes on the wire", rep.WireSize)
		return printableLine(s)
	}
	return ""
}

func printMessage(w io.Writer, n int, r *pipe.Received, m *message.Message, reps []encoding.ElementReport) error {
	via := ""
	if r.Relayed {
		via = ", relayed"
	}
	if _, err := fmt.Fprintf(w, "message %d from %s (%s%s)\n", n, sender(r), english.Count(m.Len(), "element", "elements"), via); err != nil {
		return err
	}
	for i, e := range m.Elements() {
		name := printableLine(e.Name)
		if e.Namespace != "" {
			name = printableLine(e.Namespace) + ":" + name
		}
		var body string
		switch {
		case encoding.IsEncoded(e):
			body = fmt.Sprintf("%d bytes, still encoded", len(e.Data))
		case isText(e.Type()) && utf8.Valid(e.Data):
			body = strings.ReplaceAll(printableText(strings.TrimRight(string(e.Data), "\r\n")), "\n", "\n    ")
		default:
			body = fmt.Sprintf("%d bytes", len(e.Data))
		}
		if _, err := fmt.Fprintf(w, "  %s (%s%s): %s\n", name, printableLine(e.Type()), decodedAs(reps, i), body); err != nil {
			return err
		}
	}
	return nil
}

func isText(mime string) bool {
	mime = strings.ToLower(mime)
	return strings.HasPrefix(mime, "text/") || strings.Contains(mime, "xml") || strings.Contains(mime, "json")
}

// nextMessageNumber is the number after the highest of the messages
// whose elements dir holds (writeElements' names), 1 in a directory
// without any: a recv restarted on its --out directory goes on where
// the last left off, rather than writing over its files.
func nextMessageNumber(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	last := 0
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "-")
		if n, err := strconv.Atoi(num); ok && err == nil && len(num) >= 6 && len(num) <= 12 && n > last {
			last = n
		}
	}
	return last + 1, nil
}

// writeElements writes each element of message n to its own file.
func writeElements(dir string, n int, m *message.Message) error {
	for i, e := range m.Elements() {
		path := filepath.Join(dir, fmt.Sprintf("%06d-%02d-%s", n, i, safeName(e.Name)))
		if err := os.WriteFile(path, e.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// safeName keeps a file name to letters, digits, '.', '-' and '_'.
func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) == 0 || b[0] == '.' {
		b = append([]byte("element"), b...)
	}
	if len(b) > 100 {
		b = b[:100]
	}
	return string(b)
}

// endpointHeaders selects the address headers JXTA's endpoint adds to
// every message (jxta:EndpointSourceAddress and
// jxta:EndpointDestinationAddress, as JXSE's EndpointServiceImpl writes
// them): a sender's endpoint, not the sender, writes them, so they cannot
// come sealed. JXTA's TCP transport removes them, and its router headers,
// before delivery; over libp2p the endpoint lets a source address
// through only when it names the authenticated sender. Every other
// element, in JXTA's namespace too, is the sender's.
type endpointHeaders struct{}

func (endpointHeaders) Select(e message.Element) bool {
	return e.Namespace == message.JXTANamespace && (e.Name == endpoint.SourceElement || e.Name == jxtatcp.DestinationElement)
}
