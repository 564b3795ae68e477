package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/spf13/cobra"

	"github.com/p2pmsg/p2pmsg/internal/interrupt"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/seal"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

// memberGrace bounds how long `send` on a propagate pipe waits, once one
// member is known, for the other peers given with --peer to be known as
// members too. A member announces its subscription one round trip after
// the pubsub stream to it opens, so on any path a pipe is used on,
// loaded machine included, the wait ends long before; the whole bound is
// spent only when a peer given is not a member, which send then says.
const memberGrace = 5 * time.Second

// waitGivenMembers waits, at most memberGrace, until every peer given is
// a member of the propagate pipe out, and warns on w of those that are
// not: a member not known when the message is published does not get it
// (gossipsub sends to the members it knows, and this peer, no member,
// gossips nothing later).
func waitGivenMembers(ctx context.Context, w io.Writer, out *pipe.OutputPipe, given []peer.AddrInfo) {
	var ids []peer.ID
	for _, ai := range given {
		if !slices.Contains(ids, ai.ID) {
			ids = append(ids, ai.ID)
		}
	}
	if len(ids) < 2 {
		return // one member is known already
	}
	gctx, cancel := context.WithTimeout(ctx, memberGrace)
	defer cancel()
	if out.WaitMembers(gctx, len(ids)) == nil || ctx.Err() != nil {
		return
	}
	members := out.Members()
	for _, id := range ids {
		if !slices.Contains(members, id) {
			fmt.Fprintf(w, "p2pmsg: warning: --peer %s is not a member of the pipe: it may not get the message\n", id)
		}
	}
}

// connectGiven connects to the first of the peers given with --peer for a
// propagate pipe that it can reach (gossipsub learns members only from
// connected peers; the pipe connects to the rest), and fails with the
// first dial's error when none can be reached: waiting
// for members then would last until --timeout and say only that it
// timed out, where a unicast pipe's send says at once why (connection
// refused). A peer that can be reached but is not a member is
// waitGivenMembers' to report.
func connectGiven(ctx context.Context, n *node.Node, given []peer.AddrInfo) error {
	var first error
	for _, ai := range given {
		err := n.Connect(ctx, ai)
		if err == nil {
			return nil
		}
		if first == nil {
			first = fmt.Errorf("no --peer reachable: %w", err)
		}
	}
	return first
}

// propagateGrace is how long `send` stays up after publishing on a
// propagate pipe, which has no acknowledgement, so that gossipsub can
// write the message out before the process exits.
const propagateGrace = time.Second

func newSendCmd() *cobra.Command {
	var (
		advFile, keyFile, ns, mime, encode, sel, pskFile string
		peers, elems, dicts, models                      []string
		count                                            int
		useSocket, jxtaUnsigned, verbose                 bool
		timeout                                          time.Duration
	)
	cmd := &cobra.Command{
		Use:   "send --pipe ADV.xml --peer MULTIADDR --elem NAME=VALUE",
		Short: "Send messages on a pipe (or stdin over a socket)",
		Long: `Send one message per --count on the pipe of an advertisement, to where the
pipe is bound at the --peer given (a full multiaddr ending in /p2p/<id>, as
` + "`p2pmsg recv`" + ` prints it). Each --elem NAME=VALUE adds a text element, and
NAME=@FILE an element holding the file's bytes; --ns and --mime set their
namespace and MIME type. For unicast and secure pipes send exits 0 once the
receiving peer has every message; propagate pipes have no acknowledgement:
send waits until the peers given are members (at most 5 s once one is,
warning of those that are not), publishes, and lingers a second.
A receiver that cannot decode a message (a key it lacks, a policy such as
recv --psk) refuses it, and send then fails with its reason.

--encode compresses or encrypts the elements named by --select (all by
default) with a codec chain such as gzip:6, zstd:3 or zstd:9,seal (compress,
then encrypt); seal encrypts to the receiving peer's identity, so only it
can open the element, or with --psk to a pre-shared key. A codec naming a
trained model by ID (xml@7, zstd:19@9) encodes with the --model file of
that ID; the receiver needs the same file (recv --model), or refuses the
message naming the ID. --dict or --model files of which --encode uses
none (--encode gzip, auto, or no --encode) are a usage error, not ignored.
A receiver decodes an encoded element to at most 16 MiB (64 MiB a
message) and refuses one that claims more: send larger files unencoded
(up to 64 MiB a message) or with --socket.
--encode auto chooses per element and message between sending it as it is
and one codec and level, by what it learned of the codecs, of the path to
the peer (measured before sending) and of the peer's decode speed.

With --socket, copy stdin over a socket connection instead, half-close,
and exit 0 once the peer has read everything (like nc); if the peer
resets the socket first (interrupted, or gone), fail at once, even while
stdin is idle.

A --peer tcp://HOST:PORT is a JXTA peer (JXSE 2.7) on JXTA's own TCP
transport: the pipe (a unicast pipe) is resolved there with JXTA's pipe
binding protocol and the messages sent as a JXSE output pipe sends them,
signed as JXSE requires by default (--jxta-unsigned for JXSE peers started
with CBJX disabled). JXTA has no acknowledgement: send then exits 0 once
every message is written to the connection. With --socket the connection is
a JxtaSocket to the peer's JxtaServerSocket on the pipe: send exits 0 once
the peer has acknowledged every byte and answered the close.`,
		Example: `  p2pmsg send --pipe chat.xml --peer /ip4/127.0.0.1/tcp/9701/p2p/12D3KooW… --elem text=hello
  p2pmsg send --pipe chat.xml --peer … --elem doc=@report.xml --encode zstd:9,seal --select doc
  tar c dir | p2pmsg send --socket --pipe chat.xml --peer …`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			a, err := readAdvFile(advFile, cmd.InOrStdin())
			if err != nil {
				return err
			}
			if len(peers) == 0 {
				return usageError{errors.New("--peer MULTIADDR is required (recv prints its multiaddrs)")}
			}
			var infos []peer.AddrInfo
			var jxtaPeers []string
			for _, s := range peers {
				if strings.HasPrefix(s, "tcp://") || strings.HasPrefix(s, "jxta://") {
					if err := checkJXTATCP("--peer", s, false, true); err != nil {
						return err
					}
					jxtaPeers = append(jxtaPeers, s)
					continue
				}
				ai, err := peer.AddrInfoFromString(s)
				if err != nil {
					return usageError{fmt.Errorf("--peer %q: want a multiaddr ending in /p2p/<peer id>: %v", s, multiaddrCause(s, err))}
				}
				infos = append(infos, *ai)
			}
			if count < 1 {
				return usageError{errors.New("--count must be >= 1")}
			}
			if timeout < 0 {
				return usageError{errors.New("--timeout must be >= 0 (0: never)")}
			}
			if len(jxtaPeers) > 0 {
				switch {
				case len(infos) > 0:
					return usageError{errors.New("--peer: give JXTA peers (tcp://, jxta://) or libp2p peers, not both")}
				case encode != "":
					return usageError{errors.New("--encode: JXTA peers cannot decode p2pmsg's encodings")}
				case a.Type != adv.Unicast:
					return usageError{fmt.Errorf("--peer %s: only unicast pipes are shared with JXTA peers (this one is %s)", jxtaPeers[0], a.Type)}
				}
			} else if jxtaUnsigned {
				return usageError{errors.New("--jxta-unsigned applies to JXTA peers: --peer tcp://HOST:PORT or jxta://…")}
			}
			if useSocket && (len(elems) > 0 || encode != "" || len(dicts) > 0 || len(models) > 0 || ns != "" || mime != "" || cmd.Flags().Changed("count")) {
				return usageError{errors.New("--socket sends stdin: --elem, --encode, --dict, --model, --ns, --mime and --count do not apply")}
			}
			if !useSocket && len(elems) == 0 {
				return usageError{errors.New("nothing to send: give --elem NAME=VALUE or NAME=@FILE, or --socket")}
			}
			if sel != "" && encode == "" {
				return usageError{errors.New("--select needs --encode")}
			}
			if verbose && encode == "" {
				return usageError{errors.New("--verbose reports what --encode did: give --encode")}
			}
			if err := checkAutoAndPSK(encode, pskFile); err != nil {
				return usageError{err}
			}
			var keys codecKeys
			if err := keys.load(pskFile, dicts, models); err != nil {
				return err
			}
			if err := keys.checkUsed("--encode", encode); err != nil {
				return err
			}
			if encode != "" && encode != autoEncode {
				// A wrong --encode is a wrong command line: say so before
				// connecting, not after a dial that may fail for its own
				// reasons. The recipient to seal to is only known once
				// the pipe is resolved; the first --peer stands in.
				check := keys
				if len(infos) > 0 {
					check.recipient = infos[0].ID
				}
				var ue usageError
				if _, err := check.codecs(encode, "--psk FILE, or one --peer to seal to"); errors.As(err, &ue) {
					return err
				}
			}
			if keyFile != "" {
				if err := checkKeyPath("--key "+keyFile, keyFile); err != nil {
					return err
				}
			}
			var m *message.Message
			if !useSocket {
				if m, err = buildMessage(elems, ns, mime); err != nil {
					return err
				}
			}
			ctx, stop := interrupt.Context(cmd.Context())
			defer stop()
			defer exitOnSignal(ctx, &err)
			if timeout > 0 && !useSocket {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			p, err := startPeer(ctx, keyFile, nil, jxtaConfig{on: len(jxtaPeers) > 0, unsigned: jxtaUnsigned})
			if err != nil {
				return err
			}
			defer p.Close()
			if len(jxtaPeers) > 0 {
				defer func() { err = signingMismatch(p, err, jxtaUnsigned) }()
			}
			if useSocket {
				resolve := pipe.ToPeers(infos...)
				if len(jxtaPeers) > 0 {
					resolve = pipe.ToJXTAPeers(jxtaPeers...)
				}
				return sendSocket(ctx, cmd, p, a, resolve)
			}
			resolveOpt := pipe.ToPeers(infos...)
			if len(jxtaPeers) > 0 {
				resolveOpt = pipe.ToJXTAPeers(jxtaPeers...)
			}
			if a.Type == adv.Propagate {
				if err := connectGiven(ctx, p.node, infos); err != nil {
					return err
				}
			}
			out, err := p.pipes.NewOutputPipe(ctx, a, resolveOpt)
			if err != nil {
				return err
			}
			defer out.Close()
			var sender encoding.Sender = out
			flush := out.Flush
			if encode != "" {
				keys.recipient = out.RemotePeer()
				if keys.recipient == "" && len(infos) == 1 {
					keys.recipient = infos[0].ID
				}
				names := elementNames(elems)
				if sel != "" {
					names = strings.Split(sel, ",")
					for _, n := range names {
						if !slices.Contains(elementNames(elems), n) {
							fmt.Fprintf(cmd.ErrOrStderr(), "p2pmsg: warning: --select %s: the message has no element of that name; it is not encoded\n", printableLine(n))
						}
					}
				}
				var scheme encoding.Scheme
				var chain []string // a fixed chain's codecs, for --verbose
				if encode == autoEncode {
					auto, done, err := newAutoScheme(ctx, p, keyFile, keys.recipient, names, a.ID.String(), cmd.ErrOrStderr())
					if err != nil {
						return err
					}
					defer done()
					scheme = auto
				} else {
					codecs, err := keys.codecs(encode, "--psk FILE, or one --peer to seal to")
					if err != nil {
						return err
					}
					if scheme, err = encoding.New(codecs, encoding.WithSelector(encoding.ByName(names...)), encoding.WithPipeID(a.ID.String())); err != nil {
						return err
					}
					for _, c := range codecs {
						chain = append(chain, c.Name())
					}
				}
				var next encoding.Sender = out
				if verbose {
					next = &sizeReporter{next: out, orig: m, chain: chain, w: cmd.ErrOrStderr()}
				}
				eo, err := encoding.NewOutput(next, scheme)
				if err != nil {
					return err
				}
				// Its Flush flushes the pipe and times the exchange for
				// --encode auto's path model.
				sender, flush = eo, eo.Flush
			}
			if a.Type == adv.Propagate {
				if err := out.WaitMembers(ctx, 1); err != nil {
					return err
				}
				waitGivenMembers(ctx, cmd.ErrOrStderr(), out, infos)
			}
			for range count {
				if err := sender.Send(ctx, m); err != nil {
					return err
				}
			}
			if a.Type == adv.Propagate {
				return sleep(ctx, propagateGrace)
			}
			return flush(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&advFile, "pipe", "", "pipe advertisement file (required)")
	f.StringArrayVar(&peers, "peer", nil, "full multiaddr of a peer where the pipe may be bound, or a JXTA peer's tcp://HOST:PORT (repeatable)")
	f.BoolVar(&verbose, "verbose", false, "with --encode: say on stderr, per element of each message, its codecs (zstd+seal: as recv prints them) and the size before and after")
	f.BoolVar(&jxtaUnsigned, "jxta-unsigned", false, "with a JXTA --peer: neither sign nor require signed messages (JXSE with CBJX disabled)")
	f.StringArrayVar(&elems, "elem", nil, "element NAME=VALUE (text) or NAME=@FILE (repeatable)")
	f.StringVar(&ns, "ns", "", "namespace of the elements")
	f.StringVar(&mime, "mime", "", "MIME type of the elements (default text/plain;charset=UTF-8 for text, application/octet-stream for files)")
	f.IntVar(&count, "count", 1, "how many times to send the message")
	f.StringVar(&keyFile, "key", "", "identity key file (default: a fresh identity)")
	f.BoolVar(&useSocket, "socket", false, "copy stdin over a socket connection instead")
	f.StringVar(&encode, "encode", "", "codec chain for the selected elements, e.g. gzip:6 or zstd:9,seal, or auto")
	f.StringVar(&sel, "select", "", "comma-separated names of the elements to encode (default all)")
	f.StringVar(&pskFile, "psk", "", "pre-shared key file for seal (32 bytes, raw or hex); default: seal to the receiver's identity")
	f.StringArrayVar(&dicts, "dict", nil, encodeDictUsage)
	f.StringArrayVar(&models, "model", nil, encodeModelUsage)
	f.DurationVar(&timeout, "timeout", time.Minute, "give up sending messages after this long (0: never; --socket only bounds connecting)")
	return cmd
}

// checkAutoAndPSK refuses --encode auto chained with codecs (it chooses
// one compression codec per element, and never seals) and a --psk that
// no seal in --encode would use: the elements would go in the clear
// while the command line says they are encrypted.
func checkAutoAndPSK(encode, pskFile string) error {
	specs := strings.Split(encode, ",")
	if len(specs) > 1 && slices.Contains(specs, autoEncode) {
		return fmt.Errorf("--encode auto chooses one codec per element and takes no other (%q); it does not seal", encode)
	}
	if pskFile == "" || !sealsNothing(encode) {
		return nil
	}
	return fmt.Errorf("--psk is the key of seal, and --encode %q has no seal: nothing would be encrypted (give --encode zstd:9,seal, say)", encode)
}

// sealsNothing reports whether a codec chain is empty or names no seal
// (zstd:9). A chain that does not parse is not said to seal nothing:
// building it says what is wrong with it, where a key's check would
// send the user looking for a seal the chain may well have.
func sealsNothing(chain string) bool {
	c, err := encoding.ParseChain(chain)
	return chain == "" || err == nil && !slices.ContainsFunc(c, func(s encoding.Spec) bool { return s.Name == seal.Name })
}

// buildMessage makes the message the --elem flags describe.
func buildMessage(elems []string, ns, mime string) (*message.Message, error) {
	m := message.New()
	for _, spec := range elems {
		name, value, ok := strings.Cut(spec, "=")
		if !ok || name == "" {
			return nil, usageError{fmt.Errorf("--elem %q: want NAME=VALUE or NAME=@FILE", spec)}
		}
		e := message.Element{Namespace: ns, Name: name, MIME: mime}
		if file, isFile := strings.CutPrefix(value, "@"); isFile {
			data, err := readFileLimited(file, 1<<30, "element file")
			if err != nil {
				return nil, err
			}
			e.Data = data
			if e.MIME == "" {
				e.MIME = "application/octet-stream"
			}
		} else {
			e.Data = []byte(value)
			if e.MIME == "" {
				e.MIME = "text/plain;charset=UTF-8"
			}
		}
		m.Add(e)
	}
	return m, nil
}

// sizeReporter is the sender under an encoding output for send
// --verbose: it sees each message as encoded and says, per element, its
// codecs and the size before (in orig, the message given) and after. The
// codecs are the fixed chain's, joined as recv prints them (zstd+seal),
// since only the outer codec's header is in the clear; with no chain
// (--encode auto, one codec per element) the header's.
type sizeReporter struct {
	next  *pipe.OutputPipe
	orig  *message.Message
	chain []string
	w     io.Writer
	n     int
}

// Flush is the output pipe's, so that the encoding output above can time
// its exchanges (encoding.Output.Flush).
func (s *sizeReporter) Flush(ctx context.Context) error { return s.next.Flush(ctx) }

func (s *sizeReporter) Send(ctx context.Context, m *message.Message) error {
	s.n++
	for i, e := range m.Elements() {
		codec := "plain"
		if encoding.IsEncoded(e) {
			if h, _, err := encoding.ParseHeader(e.Data); err == nil {
				codec = h.Codec
				if len(s.chain) > 0 && s.chain[len(s.chain)-1] == h.Codec {
					codec = strings.Join(s.chain, "+")
				}
			}
		}
		before := len(e.Data)
		if i < s.orig.Len() {
			before = len(s.orig.At(i).Data)
		}
		fmt.Fprintf(s.w, "message %d element %s: %s, %d → %d bytes\n", s.n, printableLine(e.Name), printableLine(codec), before, len(e.Data))
	}
	return s.next.Send(ctx, m)
}

func elementNames(elems []string) []string {
	var names []string
	for _, spec := range elems {
		name, _, _ := strings.Cut(spec, "=")
		names = append(names, name)
	}
	return names
}

func sendSocket(ctx context.Context, cmd *cobra.Command, p *peerStack, a *adv.PipeAdvertisement, resolve pipe.ResolveOption) error {
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	c, err := p.sockets.Dial(dctx, a, resolve)
	cancel()
	if err != nil {
		return err
	}
	peerName := socketPeer(c)
	defer c.Close()
	// A signal resets rather than closes: the peer must not read a
	// clean end of stream after what stdin gave so far.
	stop := context.AfterFunc(ctx, func() { c.Reset() })
	defer stop()
	// What the peer sends back goes to stdout, as nc does; its end of
	// stream means it has read everything and closed.
	back := make(chan error, 1)
	go func() {
		_, err := io.Copy(cmd.OutOrStdout(), c)
		back <- err
	}()
	// stdin is read in its own goroutine, so an interrupt is noticed
	// even while stdin is idle.
	sent := make(chan error, 1)
	go func() {
		_, err := io.Copy(c, cmd.InOrStdin())
		sent <- err
	}()
	backDone := false
	for sending := true; sending; {
		select {
		case err := <-sent:
			if err != nil {
				c.Reset() // stdin failed: what was sent is not all of it
				return fmt.Errorf("socket to %s: %w", peerName, err)
			}
			sending = false
		case err := <-back:
			// The peer's side ended before stdin did. With an error (it
			// reset the stream, or went away) nothing more it is sent
			// will be read: fail now rather than when stdin, which may
			// stay idle for ever, next gives bytes. A clean end is the
			// peer closing its writing half only: go on sending.
			if err != nil {
				c.Reset()
				return fmt.Errorf("socket to %s: before the end of stdin: %w", peerName, err)
			}
			backDone, back = true, nil // a nil channel is never ready again
		case <-ctx.Done():
			// Here too, and before the deferred Close: the AfterFunc's
			// Reset runs in its own goroutine and may come after it.
			c.Reset()
			err := fmt.Errorf("socket to %s: cut short", peerName)
			if _, bySignal := interrupt.Cause(ctx); !bySignal {
				err = fmt.Errorf("%w: %w", err, context.Cause(ctx))
			} // else exitOnSignal says which signal, once
			return err
		}
	}
	if err := c.CloseWrite(); err != nil {
		return fmt.Errorf("socket to %s: %w", peerName, err)
	}
	if !c.RemoteAddr().(socket.Addr).JXTAPeer.IsZero() || backDone {
		// JXTA's close ends both directions, once the peer has
		// acknowledged every byte: nothing more can come back.
		return nil
	}
	if err := <-back; err != nil {
		return fmt.Errorf("socket to %s: waiting for the peer to finish: %w", peerName, err)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// signingMismatch is err, a pipe that JXTA peers did not resolve, with
// the likelier cause first when a JXTA peer sent this signing peer
// unsigned messages: it was started with CBJX disabled, and its answers
// were dropped (as JXSE drops them), which read as no peer having the
// pipe bound. Other errors are returned as they are.
func signingMismatch(p *peerStack, err error, unsigned bool) error {
	if err == nil || unsigned || !errors.Is(err, pipe.ErrNotResolved) || p.ep.JXTA() == nil {
		return err
	}
	if p.ep.JXTA().Stats().Unsigned == 0 {
		return err
	}
	return fmt.Errorf("the JXTA peer sent unsigned messages, which were dropped %s: %w", unsignedHint, err)
}
