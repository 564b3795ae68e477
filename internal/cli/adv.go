package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/libp2p/go-libp2p/core/peer"
	"os"

	"github.com/spf13/cobra"

	"github.com/p2pmsg/p2pmsg/pkg/adv"
	"github.com/p2pmsg/p2pmsg/pkg/id"
)

var pipeTypes = map[string]adv.PipeType{
	"unicast":   adv.Unicast,
	"secure":    adv.UnicastSecure,
	"propagate": adv.Propagate,
}

func newAdvCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "adv",
		Short: "Create and inspect pipe advertisements",
	}
	cmd.AddCommand(newAdvNewCmd(), newAdvShowCmd())
	return cmd
}

func newAdvNewCmd() *cobra.Command {
	var typ, name, desc, pipeID string
	var binders []string
	cmd := &cobra.Command{
		Use:   "new",
		Short: "Print a new pipe advertisement (XML, as JXSE 2.7 writes it)",
		Args:  cobra.NoArgs,
		Example: `  p2pmsg adv new --type unicast --name chat > chat.xml
  p2pmsg adv new --type propagate --name news --desc "daily news" --id urn:jxta:cbid-…04
  p2pmsg adv new --type secure --name vault --binder 12D3KooW…   # the peer ID p2pmsg id prints`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, ok := pipeTypes[typ]
			if !ok {
				return usageError{fmt.Errorf("--type must be unicast, secure or propagate, not %q", typ)}
			}
			a := &adv.PipeAdvertisement{Type: t, Name: name, Desc: desc, Binders: binders}
			if t == adv.Propagate && len(binders) > 0 {
				return usageError{errors.New("--binder names who may bind a unicast or secure pipe; a propagate pipe's members are not restricted (seal its messages with --psk for a closed group)")}
			}
			for _, b := range binders {
				if _, err := peer.Decode(b); err != nil {
					return usageError{fmt.Errorf("--binder %q: not a peer ID: %w", b, err)}
				}
			}
			if pipeID != "" {
				p, err := id.Parse(pipeID)
				if err != nil {
					return usageError{fmt.Errorf("--id: %w", err)}
				}
				a.ID = p
			} else {
				p, err := id.NewPipeID(id.NetPeerGroupID)
				if err != nil {
					return err
				}
				a.ID = p
			}
			b, err := a.Marshal()
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&typ, "type", "", "pipe type: unicast, secure or propagate (required)")
	f.StringVar(&name, "name", "", "pipe name (required)")
	f.StringVar(&desc, "desc", "", "description")
	f.StringVar(&pipeID, "id", "", "pipe ID (default: a new one in the Net peer group)")
	f.StringArrayVar(&binders, "binder", nil, "peer ID allowed to bind the pipe (repeatable); resolution then trusts only these peers, and a secure pipe needs one to be found without --peer")
	cmd.MarkFlagRequired("type")
	cmd.MarkFlagRequired("name")
	return cmd
}

func newAdvShowCmd() *cobra.Command {
	var maxSize int
	cmd := &cobra.Command{
		Use:   "show FILE",
		Short: "Print a pipe advertisement's fields as JSON",
		Long:  "Print {\"id\",\"type\",\"name\",\"desc\",\"binders\"} of the pipe advertisement in FILE (- for stdin).",
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return errors.New("missing FILE: the advertisement to show (- for stdin)")
			case len(args) > 1:
				return fmt.Errorf("%d files given: adv show takes one", len(args))
			}
			return nil
		},
		Example: `  p2pmsg adv show chat.xml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			r := cmd.InOrStdin()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			}
			a, err := adv.Read(r, adv.WithMaxSize(maxSize))
			if errors.Is(err, adv.ErrBadOptions) {
				return usageError{fmt.Errorf("--max-size: %w", err)}
			}
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetEscapeHTML(false)
			return enc.Encode(struct {
				ID      string   `json:"id"`
				Type    string   `json:"type"`
				Name    string   `json:"name"`
				Desc    string   `json:"desc"`
				Binders []string `json:"binders,omitempty"`
			}{a.ID.String(), string(a.Type), a.Name, a.Desc, a.Binders})
		},
	}
	cmd.Flags().IntVar(&maxSize, "max-size", adv.DefaultMaxSize, "largest document to read, in bytes")
	return cmd
}
