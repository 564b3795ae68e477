package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/spf13/cobra"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/endpoint"
	"github.com/p2pmsg/p2pmsg/pkg/id"
	"github.com/p2pmsg/p2pmsg/pkg/jxtatcp"
	"github.com/p2pmsg/p2pmsg/pkg/node"
	"github.com/p2pmsg/p2pmsg/pkg/pipe"
	"github.com/p2pmsg/p2pmsg/pkg/socket"
)

// peerStack is a running node with its endpoint, pipe and socket
// services, as `send` and `recv` use it.
type peerStack struct {
	key     crypto.PrivKey // nil for an ephemeral identity
	node    *node.Node
	ep      *endpoint.Service
	pipes   *pipe.Service
	sockets *socket.Service
}

// jxtaConfig makes a peerStack a JXTA peer on JXTA's TCP transport too.
type jxtaConfig struct {
	on       bool
	listen   string // tcp://host:port, "" to only dial
	public   string // tcp://host:port others reach it at, "" for its listeners
	unsigned bool   // for JXSE peers started with CBJX disabled
}

// jxtaIdentityFile is where the JXTA identity (an RSA key and its
// certificate: JXSE accepts nothing else) is kept beside the libp2p key.
func jxtaIdentityFile(keyFile string) string { return keyFile + ".jxta" }

// checkListen checks --listen's multiaddrs before a node starts, so that
// a wrong one is a wrong command line (ExitUsage) said in its own terms.
func checkListen(listen []string) error {
	for _, s := range listen {
		if _, err := ma.NewMultiaddr(s); err != nil {
			return usageError{fmt.Errorf("--listen %q: want a multiaddr such as /ip4/127.0.0.1/tcp/9701: %v", s, multiaddrCause(s, err))}
		}
	}
	return nil
}

// startPeer starts a node. keyFile "" means an ephemeral identity; listen
// nil means no listening at all (a pure client).
func startPeer(ctx context.Context, keyFile string, listen []string, jx ...jxtaConfig) (*peerStack, error) {
	var opts []node.Option
	var key crypto.PrivKey
	var err error
	if keyFile != "" {
		if key, err = node.LoadOrCreateKey(keyFile); err != nil {
			return nil, err
		}
		opts = append(opts, node.WithKeyFile(keyFile))
	} else {
		opts = append(opts, node.WithEphemeralKey())
	}
	if listen == nil {
		opts = append(opts, node.WithListenAddrs(), node.WithLibp2pOptions(libp2p.NoListenAddrs))
	} else {
		opts = append(opts, node.WithListenAddrs(listen...))
	}
	n, err := node.New(ctx, opts...)
	if err != nil {
		return nil, err
	}
	s := &peerStack{key: key, node: n}
	var epOpts []endpoint.Option
	if len(jx) > 0 && jx[0].on {
		var ident *jxtatcp.Identity
		if keyFile != "" {
			ident, err = jxtatcp.LoadIdentity(jxtaIdentityFile(keyFile))
		} else {
			ident, err = jxtatcp.NewIdentity()
		}
		if err != nil {
			n.Close()
			return nil, err
		}
		var topts []jxtatcp.Option
		if jx[0].unsigned {
			topts = append(topts, jxtatcp.WithUnsigned())
		}
		if jx[0].public != "" {
			topts = append(topts, jxtatcp.WithPublicAddress(jx[0].public))
		}
		epOpts = append(epOpts, endpoint.WithJXTA(ident, jx[0].listen, topts...))
	}
	if s.ep, err = endpoint.New(n, epOpts...); err == nil {
		if s.pipes, err = pipe.New(s.ep); err == nil {
			s.sockets, err = socket.New(s.pipes)
		}
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *peerStack) Close() {
	if s.sockets != nil {
		s.sockets.Close()
	}
	if s.pipes != nil {
		s.pipes.Close()
	}
	if s.ep != nil {
		s.ep.Close()
	}
	s.node.Close()
}

// readAdvFile reads a pipe advertisement from a file ("-" is stdin).
func readAdvFile(path string, stdin io.Reader) (*adv.PipeAdvertisement, error) {
	if path == "" {
		return nil, usageError{errors.New("--pipe ADV.xml is required (make one with `p2pmsg adv new`)")}
	}
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	a, err := adv.Read(r)
	if err != nil {
		return nil, fmt.Errorf("pipe advertisement %s: %w", path, err)
	}
	return a, nil
}

func newIDCmd() *cobra.Command {
	var keyFile string
	cmd := &cobra.Command{
		Use:   "id",
		Short: "Create or show this peer's identity",
		Long: `Show the identity in the key file (created, mode 0600, if it does not exist
yet): the libp2p peer ID and the JXTA peer ID derived from the same key,
which p2pmsg peers know this one by; and the JXTA peer ID of the RSA
identity kept beside it in KEY.jxta (created too), which JXSE peers know
this one by on JXTA's TCP transport (recv --jxta, send --peer tcp://…).
Without --key the file is p2pmsg/identity.key in the user's configuration
directory, the one ` + "`p2pmsg recv`" + ` uses by default.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keyFile, err := identityFile(keyFile)
			if err != nil {
				return err
			}
			key, err := node.LoadOrCreateKey(keyFile)
			if err != nil {
				return err
			}
			pid, err := peer.IDFromPrivateKey(key)
			if err != nil {
				return err
			}
			jid, err := id.PeerIDFromPublicKey(id.NetPeerGroupID, key.GetPublic())
			if err != nil {
				return err
			}
			jx, err := jxtatcp.LoadIdentity(jxtaIdentityFile(keyFile))
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "peer id:          %s\n", pid)
			fmt.Fprintf(out, "jxta peer id:     %s\n", jid)
			fmt.Fprintf(out, "jxta tcp peer id: %s\n", jx.ID())
			fmt.Fprintf(out, "key file:         %s\n", keyFile)
			fmt.Fprintf(out, "jxta key file:    %s\n", jxtaIdentityFile(keyFile))
			return nil
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "identity key file (default: p2pmsg/identity.key in the user configuration directory)")
	return cmd
}

// checkJXTATCP checks a JXTA TCP address from the command line,
// tcp://HOST:PORT, before anything starts, so that a typo is a usage
// error (exit 2) rather than a failure to listen or an unreachable peer.
// A listen address may leave the host empty (every interface) and ask
// for port 0 (any); a peer's needs both. jxta:// addresses (peer IDs,
// resolved later) pass when peers allows them.
func checkJXTATCP(flag, s string, listen, peers bool) error {
	if peers && strings.HasPrefix(s, "jxta://") {
		return nil
	}
	want := "tcp://HOST:PORT"
	if listen {
		want = "tcp://ADDR:PORT"
	}
	ea, err := endpoint.ParseAddress(s)
	if err != nil || ea.Protocol != endpoint.ProtocolTCP || ea.Service != "" {
		return usageError{fmt.Errorf("%s %q: want %s", flag, s, want)}
	}
	host, port, err := net.SplitHostPort(ea.Addr)
	if err != nil {
		return usageError{fmt.Errorf("%s %q: want %s", flag, s, want)}
	}
	least := uint64(1)
	if listen {
		least = 0
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n < least {
		return usageError{fmt.Errorf("%s %q: port %q: want %d to 65535", flag, s, port, least)}
	}
	if host == "" && !listen {
		return usageError{fmt.Errorf("%s %q: want %s with a host", flag, s, want)}
	}
	return nil
}

// jxtaPublicUsage is --jxta-public's help, the same for recv and bridge.
const jxtaPublicUsage = "tcp://HOST:PORT JXSE peers reach this one at, behind NAT or a port forward (default: the --jxta listener's addresses)"

// checkJXTAPublic checks --jxta-public: "" or a tcp://HOST:PORT with a
// host and a port, as another peer dials it.
func checkJXTAPublic(s string) error {
	if s == "" {
		return nil
	}
	return checkJXTATCP("--jxta-public", s, false, false)
}

// jxtaOnly refuses the named flags, which only a JXTA peer (--jxta) uses,
// when given without it: silently ignored, they would leave a user
// believing them in effect.
func jxtaOnly(cmd *cobra.Command, names ...string) error {
	for _, n := range names {
		if cmd.Flags().Changed(n) {
			return usageError{fmt.Errorf("--%s applies to a JXTA peer: give --jxta tcp://ADDR:PORT too", n)}
		}
	}
	return nil
}

// multiaddrCause is err, from parsing the multiaddr s, without the
// parser's repetition of s ("failed to parse multiaddr "…": "): the line
// quotes s once, before saying what a flag wants.
func multiaddrCause(s string, err error) string {
	return strings.TrimPrefix(err.Error(), fmt.Sprintf("failed to parse multiaddr %q: ", s))
}
