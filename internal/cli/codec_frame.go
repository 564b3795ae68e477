package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/spf13/cobra"

	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/message"
	"github.com/p2pmsg/p2pmsg/pkg/node"
)

// frameMagic begins every frame (the encoding layer's header).
const frameMagic = "P2E"

// isFrame reports whether in begins as a frame does.
func isFrame(in []byte) bool { return bytes.HasPrefix(in, []byte(frameMagic)) }

// A frame is what an encoded element carries: the encoding layer's
// self-describing header (codec, level, dictionary ID, key ID, original
// MIME type and size) and the codec's payload. Frames made here are bound
// to an element with no namespace, no name and no pipe, so sealed ones
// open only as frames.

func newCodecEncodeCmd() *cobra.Command {
	var (
		codec, mime, pskFile, to string
		level                    int
		dicts, models            []string
		maxSize                  int64
	)
	cmd := &cobra.Command{
		Use:   "encode --codec NAME",
		Short: "Encode stdin into a self-describing frame on stdout",
		Long: `Encode stdin with a codec (or a chain, compress then encrypt: zstd:9,seal)
into a self-describing frame: the header an encoded element carries, then
the codec's payload. ` + "`p2pmsg codec decode`" + ` restores the input from the frame
alone, given the same dictionary, model or key.

A codec naming a model by ID (xml@7, zstd:19@9) encodes with the model of
that ID among the --model files (see ` + "`p2pmsg codec train`" + `); the frame
records the ID, and decoding needs the same model file. --dict or --model
files of which the chain uses none are a usage error.`,
		Example: `  p2pmsg codec encode --codec zstd --level 19 < doc.xml > doc.p2e
  p2pmsg codec encode --codec xml@7 --model orders.p2xm < order.xml > order.p2e
  p2pmsg codec encode --codec gzip:6,seal --key secret.key < doc.xml > doc.p2e`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if maxSize < 1 {
				return usageError{errors.New("--max-size must be positive")}
			}
			if codec == "" {
				return usageError{errors.New("--codec is required (see `p2pmsg codec list`)")}
			}
			if cmd.Flags().Changed("level") {
				c, err := encoding.ParseSpec(codec)
				if err != nil || c.Level != 0 || level == 0 {
					return usageError{errors.New("--level (nonzero) applies to a single codec without :LEVEL")}
				}
				c.Level = level
				codec = c.String()
			}
			if (pskFile != "" || to != "") && sealsNothing(codec) {
				// The frame would go out in the clear, the key unused.
				return usageError{fmt.Errorf("--key and --to are seal's keys, and --codec %q has no seal: nothing would be encrypted (give --codec zstd:9,seal, say)", codec)}
			}
			var keys codecKeys
			if err := keys.load(pskFile, dicts, models); err != nil {
				return err
			}
			if err := keys.checkUsed("--codec", codec); err != nil {
				return err
			}
			if to != "" {
				pid, err := peer.Decode(to)
				if err != nil {
					return usageError{err}
				}
				keys.recipient = pid
			}
			codecs, err := keys.codecs(codec, "--key FILE, or --to PEER")
			if err != nil {
				return err
			}
			scheme, err := encoding.New(codecs, encoding.WithoutPipeBinding()) // a frame belongs to no pipe
			if err != nil {
				return err
			}
			in, err := readInput(cmd.InOrStdin(), maxSize, "input")
			if err != nil {
				return err
			}
			e, err := scheme.EncodeElement(message.Element{MIME: mime, Data: in})
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(e.Data)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&codec, "codec", "", "codec name[:level][@model], or a comma-separated chain")
	f.IntVar(&level, "level", 0, "codec level (same as NAME:LEVEL)")
	f.StringArrayVar(&dicts, "dict", nil, encodeDictUsage)
	f.StringArrayVar(&models, "model", nil, encodeModelUsage)
	f.StringVar(&pskFile, "key", "", "pre-shared key file for seal (32 bytes, raw or hex)")
	f.StringVar(&to, "to", "", "seal to this peer ID's identity instead of a pre-shared key")
	f.StringVar(&mime, "mime", "application/octet-stream", "MIME type recorded for the input")
	f.Int64Var(&maxSize, "max-size", encoding.DefaultMaxElementSize, "largest input, in bytes")
	return cmd
}

func newCodecDecodeCmd() *cobra.Command {
	var (
		pskFile, identity string
		dicts, models     []string
		maxSize           int64
	)
	cmd := &cobra.Command{
		Use:   "decode",
		Short: "Decode a self-describing frame from stdin",
		Long: `Restore the bytes a frame of ` + "`p2pmsg codec encode`" + ` holds. The frame names
its codecs; give the dictionary, model (--model) or key they need: a frame
encoded with a model this command was not given is refused with an error
naming the model's ID. A frame larger than
--max-size, or one that says it decodes to more, is refused before
decoding.`,
		Example: `  p2pmsg codec decode < doc.p2e > doc.xml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if maxSize < 1 {
				return usageError{errors.New("--max-size must be positive")}
			}
			var keys codecKeys
			if err := keys.load(pskFile, dicts, models); err != nil {
				return err
			}
			if identity != "" {
				if _, err := os.Stat(identity); err != nil {
					return fmt.Errorf("identity: %w", err)
				}
				if err := checkKeyPath("--identity "+identity, identity); err != nil {
					return err
				}
				k, err := node.LoadOrCreateKey(identity)
				if err != nil {
					return err
				}
				keys.identity = k
			}
			reg, err := keys.registry()
			if err != nil {
				return err
			}
			in, err := readInput(cmd.InOrStdin(), maxSize, "frame")
			if err != nil {
				return err
			}
			if !isFrame(in) {
				// Every frame begins with the header's magic: this is
				// some other input (the document itself, a file of
				// another tool), which the decoder would call corrupt.
				return errors.New("stdin is not a frame of p2pmsg codec encode (a frame begins with " + frameMagic + ")")
			}
			e, err := encoding.DecodeElement(message.Element{MIME: encoding.MIME, Data: in}, int(maxSize),
				encoding.WithRegistry(reg), encoding.WithoutPipeBinding())
			if err != nil {
				return missingModel(err)
			}
			_, err = cmd.OutOrStdout().Write(e.Data)
			return err
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&dicts, "dict", nil, "zstd dictionary file (repeatable)")
	f.StringArrayVar(&models, "model", nil, modelUsage)
	f.StringVar(&pskFile, "key", "", "pre-shared key file for seal (32 bytes, raw or hex)")
	f.StringVar(&identity, "identity", "", "identity key file to open frames sealed to this peer")
	f.Int64Var(&maxSize, "max-size", encoding.DefaultMaxElementSize, "largest frame and largest decoded output, in bytes")
	return cmd
}
