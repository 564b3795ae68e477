package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/spf13/cobra"

	"github.com/p2pmsg/p2pmsg/internal/english"
	"github.com/p2pmsg/p2pmsg/internal/interrupt"
	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
)

// bridgeFlushTimeout bounds how long the bridge waits for a libp2p peer
// to take and confirm a forwarded message before it reports it
// undelivered, beyond the message's size at jxtatcp.MinFrameRate (as a
// JXTA write is bounded): a peer that keeps its connection and never
// reads would otherwise hold the forwarding loop, and every sender
// waiting on it, until the bridge is stopped, while a large message over
// a slow honest link still has the time it needs.
const bridgeFlushTimeout = 10 * time.Second

// forwardTimeout bounds forwarding m to a libp2p peer, Send and Flush
// together.
func forwardTimeout(m *message.Message) time.Duration {
	return bridgeFlushTimeout + time.Duration(m.PayloadSize())*time.Second/jxtatcp.MinFrameRate
}

func newBridgeCmd() *cobra.Command {
	var (
		advFile, keyFile, jxtaListen, p2pPeer, jxsePeer string
		jxtaPublic                                      string
		listen                                          []string
		jxtaUnsigned                                    bool
		count                                           int
	)
	cmd := &cobra.Command{
		Use:   "bridge --pipe ADV.xml --jxta tcp://ADDR:PORT --p2p-peer MULTIADDR --jxse-peer tcp://HOST:PORT",
		Short: "Relay a pipe between JXSE peers and libp2p-only p2pmsg peers",
		Long: `Bind a unicast pipe on this peer, on both of its transports: libp2p and JXTA's
own TCP transport (listening at --jxta). Each message a JXTA peer (JXSE 2.7)
sends on the pipe is sent on, on the same pipe, to the p2pmsg peer at
--p2p-peer, which binds it and needs to speak only libp2p; each message a
libp2p peer sends on it is sent on to the JXSE peer at --jxse-peer, which
binds it too. Either may be left out for a one-way bridge.

Each forwarded message is printed on stdout as one line: where it came from
(a JXTA sender taken unsigned, --jxta-unsigned, as unverified: its peer ID
is only its claim) and where it went. A message that cannot be forwarded
(the other side is down, or does not have the pipe bound) is reported on
stderr and counted, never dropped in silence; the bridge keeps running. As
recv's refusals, these lines come at most once per sending peer every
10 s, and 100 in any 10 s, all peers together, the others counted with
that peer's next line (or after the 10 s) or when the bridge ends. A
message to a libp2p peer counts as forwarded once that peer confirmed it
(Flush). A libp2p peer's message that could not be forwarded is refused
back to it, with the reason, so its sender learns it was not delivered
(p2pmsg send exits 1); JXTA has no refusal, so a JXSE peer's is reported
here only. A message that arrives as the bridge stops is refused,
reported and counted too; the bridge exits 1 with the count if there was
any (130, 143 or 129 when SIGINT, SIGTERM or SIGHUP stopped it, the count
still said). Stopping after --count, it first lets the libp2p peers whose
messages it forwarded see them delivered (for at most two seconds), as
recv --count does.

JXSE peers reach the bridge as they reach another JXSE peer: once it has
connected to them (it does when it first forwards to --jxse-peer), or once
the application has added a route to the bridge's JXTA peer ID and --jxta
address, which the bridge prints at start ("listening jxta ADDR ID"). Behind
NAT or a port forward, --jxta-public tcp://HOST:PORT is the address JXSE
peers are told to reach it at (in its welcome and its pipe resolver
answers; printed "announcing jxta ADDR ID").`,
		Example: `  p2pmsg bridge --pipe chat.xml --jxta tcp://0.0.0.0:9711 --listen /ip4/0.0.0.0/tcp/9701 \
      --p2p-peer /ip4/10.0.0.7/tcp/9701/p2p/12D3KooW… --jxse-peer tcp://10.0.0.5:9701`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			a, err := readAdvFile(advFile, cmd.InOrStdin())
			if err != nil {
				return err
			}
			if a.Type != adv.Unicast {
				return usageError{fmt.Errorf("--pipe: only unicast pipes are shared with JXTA peers (this one is %s)", a.Type)}
			}
			if err := checkJXTATCP("--jxta", jxtaListen, true, false); err != nil {
				return err
			}
			if err := checkJXTAPublic(jxtaPublic); err != nil {
				return err
			}
			if p2pPeer == "" && jxsePeer == "" {
				return usageError{errors.New("nothing to bridge to: give --p2p-peer, --jxse-peer or both")}
			}
			var toP2P *peer.AddrInfo
			if p2pPeer != "" {
				if toP2P, err = peer.AddrInfoFromString(p2pPeer); err != nil {
					return usageError{fmt.Errorf("--p2p-peer %q: want a multiaddr ending in /p2p/<peer id>: %v", p2pPeer, multiaddrCause(p2pPeer, err))}
				}
			}
			if jxsePeer != "" {
				if err := checkJXTATCP("--jxse-peer", jxsePeer, false, true); err != nil {
					return err
				}
			}
			if count < 0 {
				return usageError{errors.New("--count must be >= 0")}
			}
			if err := checkListen(listen); err != nil {
				return err
			}
			if keyFile, err = identityFile(keyFile); err != nil {
				return err
			}
			ctx, stop := interrupt.Context(cmd.Context())
			defer stop()
			defer exitOnSignal(ctx, &err)
			p, err := startPeer(ctx, keyFile, listen, jxtaConfig{on: true, listen: jxtaListen, public: jxtaPublic, unsigned: jxtaUnsigned})
			if err != nil {
				return err
			}
			defer p.Close()
			defer watchUnsigned(p, cmd.ErrOrStderr())()
			h := newHandoff(cmd.ErrOrStderr())
			in, err := p.pipes.NewInputPipe(a, pipe.WithHandler(h.handle))
			if err != nil {
				return err
			}
			defer in.Close()
			announce(cmd, p)
			p2p := &forwarder{pipes: p.pipes, adv: a, confirm: true}
			if toP2P != nil {
				p2p.opt = pipe.ToPeers(*toP2P)
			}
			jx := &forwarder{pipes: p.pipes, adv: a}
			if jxsePeer != "" {
				jx.opt = pipe.ToJXTAPeers(jxsePeer)
			}
			defer p2p.close()
			defer jx.close()
			_, failed, err := runBridge(ctx, h, p2p, jx, p2pPeer, jxsePeer, count, cmd.OutOrStdout())
			in.Close()
			failed += h.finish()
			// Interrupted (ctx ended, the command's did not) is a normal
			// way to stop.
			if err != nil && !(ctx.Err() != nil && cmd.Context().Err() == nil) {
				return err
			}
			var derr error
			if err == nil && count > 0 {
				// Done: the libp2p senders see their messages delivered
				// (and those refused as stopped, the refusal), as recv's.
				derr = drain(ctx, p)
			}
			if failed > 0 {
				return fmt.Errorf("bridge: %s could not be forwarded (see above)", english.Count(failed, "message", "messages"))
			}
			return derr
		},
	}
	f := cmd.Flags()
	f.StringVar(&advFile, "pipe", "", "pipe advertisement file of the unicast pipe to bridge (required)")
	f.StringVar(&jxtaListen, "jxta", "", "JXTA TCP address to listen at, tcp://ADDR:PORT (required)")
	f.StringArrayVar(&listen, "listen", []string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"}, "libp2p multiaddr to listen on (repeatable)")
	f.StringVar(&p2pPeer, "p2p-peer", "", "full multiaddr of the libp2p peer that gets JXTA peers' messages")
	f.StringVar(&jxsePeer, "jxse-peer", "", "tcp://HOST:PORT of the JXSE peer that gets libp2p peers' messages")
	f.StringVar(&keyFile, "key", "", "identity key file (default: p2pmsg/identity.key in the user configuration directory; the JXTA identity is KEY.jxta)")
	f.BoolVar(&jxtaUnsigned, "jxta-unsigned", false, "neither sign nor require signed JXTA messages (JXSE with CBJX disabled)")
	f.StringVar(&jxtaPublic, "jxta-public", "", jxtaPublicUsage)
	f.IntVar(&count, "count", 0, "exit after forwarding this many messages (0: run until interrupted)")
	return cmd
}

// handoff hands a bridge's messages from the input pipe's reader to the
// forwarding loop, one at a time, and holds each in the input pipe's
// handler until the loop has forwarded it or failed to: a message the
// loop could not forward is refused back to its sender (a libp2p sender's
// Send or Flush then reports it; JXTA has no refusal), so that no sender
// is told a message arrived that went nowhere. Once the loop has stopped
// (finish), what still comes is refused and reported not forwarded, and
// counted with the loop's failures: a JXSE sender, told nothing, has only
// the bridge's count to learn of it.
type handoff struct {
	got     chan *handed
	stopped chan struct{}
	once    sync.Once
	lines   *repeats // the lines about messages not forwarded, per sender

	mu      sync.Mutex
	counted bool           // finish has counted: a handler no longer reports
	running sync.WaitGroup // handlers that may still report a message
	refused int            // messages refused as stopped, and reported
}

// handed is a message handed to the forwarding loop, which sends on done
// what became of it: nil once forwarded.
type handed struct {
	*pipe.Received
	done chan error
}

func newHandoff(errOut io.Writer) *handoff {
	return &handoff{got: make(chan *handed), stopped: make(chan struct{}), lines: newRepeats(errOut)}
}

// notForwarded reports that a message from src, of the sender lineKey
// names key and of, was not forwarded, and why.
func (h *handoff) notForwarded(key, of, src, why string) {
	h.lines.lineOf(key, of, fmt.Sprintf("p2pmsg: bridge: message from %s not forwarded: %s", src, why))
}

// stoppedReason is the refusal of a message that came after the loop.
const stoppedReason = "the bridge has stopped"

func (h *handoff) handle(r *pipe.Received) {
	defer r.Release()
	h.mu.Lock()
	if h.counted {
		// A delivery that was under way when the pipe closed: the
		// command has ended and printed its count.
		h.mu.Unlock()
		r.Refuse(stoppedReason)
		return
	}
	h.running.Add(1)
	h.mu.Unlock()
	defer h.running.Done()
	m := &handed{Received: r, done: make(chan error, 1)}
	select {
	case h.got <- m:
		if err := <-m.done; err != nil {
			// Its cause first (shortError), as the sender cuts the
			// reason to a line: the chain of what the forward was doing
			// (the pipe, the endpoint, the route) otherwise fills it.
			r.Refuse("the bridge could not forward it: " + shortError(err))
		}
	case <-h.stopped:
		r.Refuse(stoppedReason)
		key, of := lineKey(r)
		h.notForwarded(key, of, sender(r), stoppedReason)
		h.mu.Lock()
		h.refused++
		h.mu.Unlock()
	}
}

// ReceiveFrom is the forwarding loop's next message; the loop sends what
// became of it on its done, once. Once ctx has ended it takes no more:
// they could not be forwarded, and finish refuses them as stopped.
func (h *handoff) ReceiveFrom(ctx context.Context) (*handed, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case m := <-h.got:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (h *handoff) stop() { h.once.Do(func() { close(h.stopped) }) }

// finish stops the handoff once the forwarding loop has ended, waits for
// the handlers under way to refuse their messages, writes the lines held
// back, and returns how many they refused and reported: every report has
// been counted. Closing the input pipe first leaves few or none to wait
// for.
func (h *handoff) finish() int {
	h.stop()
	h.mu.Lock()
	h.counted = true
	h.mu.Unlock()
	h.running.Wait()
	h.lines.flush()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refused
}

// runBridge forwards what arrives from in: from JXTA peers through p2p,
// from libp2p peers through jx, until count messages are forwarded (0:
// until ctx ends or in fails). It prints a line on out per message
// forwarded, reports those that were not as in's handlers do (a line
// per sender every repeatWindow, the others counted), and tells in what
// became of each message before it looks at the next.
func runBridge(ctx context.Context, in *handoff, p2p, jx *forwarder, p2pName, jxseName string, count int, out io.Writer) (forwarded, failed int, err error) {
	for count == 0 || forwarded < count {
		m, err := in.ReceiveFrom(ctx)
		if err != nil {
			return forwarded, failed, err
		}
		src := m.From
		key, of := lineKey(m.Received)
		from, f, to := "p2p "+src.String(), jx, "jxta "+jxseName
		if src == "" {
			from, f, to = "jxta "+m.FromJXTA.String(), p2p, "p2p "+p2pName
			if m.Unverified {
				// Its peer ID is only its claim (--jxta-unsigned), as
				// recv says of such a sender.
				from += " (unsigned: unverified)"
			}
		}
		err = f.send(ctx, m.Message)
		m.done <- err // m is the handler's again: not to be read from here on
		if err != nil {
			failed++
			in.notForwarded(key, of, from, oneLine(err.Error()))
			continue
		}
		forwarded++
		if _, err := fmt.Fprintf(out, "forwarded message %d from %s to %s\n", forwarded, from, to); err != nil {
			return forwarded, failed, err
		}
	}
	return forwarded, failed, nil
}

// forwarder sends a bridge's messages on the pipe to one side, resolving
// the pipe there when it first has to and again after a failure.
type forwarder struct {
	pipes   *pipe.Service
	adv     *adv.PipeAdvertisement
	opt     pipe.ResolveOption // nil: this side was not given
	confirm bool               // wait for the peer's confirmation (libp2p)
	// timeout bounds a confirmed forward (nil: forwardTimeout; tests
	// shorten it).
	timeout func(*message.Message) time.Duration
	out     *pipe.OutputPipe
}

func (f *forwarder) send(ctx context.Context, m *message.Message) error {
	if f.opt == nil {
		return errors.New("no peer given for this direction")
	}
	if f.out == nil {
		out, err := f.pipes.NewOutputPipe(ctx, f.adv, f.opt)
		if err != nil {
			return err
		}
		f.out = out
	}
	if f.confirm {
		timeout := forwardTimeout
		if f.timeout != nil {
			timeout = f.timeout
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout(m))
		defer cancel()
	}
	err := f.out.Send(ctx, m)
	if err == nil && f.confirm {
		err = f.out.Flush(ctx)
	}
	if err != nil {
		f.close()
	}
	return err
}

func (f *forwarder) close() {
	if f.out != nil {
		f.out.Close()
		f.out = nil
	}
}
