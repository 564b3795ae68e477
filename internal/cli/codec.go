package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/p2pmsg/p2pmsg/internal/codecbench" // also registers the codecs
	"github.com/p2pmsg/p2pmsg/internal/interrupt"
	"github.com/p2pmsg/p2pmsg/internal/provenance"
	"github.com/p2pmsg/p2pmsg/pkg/encoding"
	"github.com/p2pmsg/p2pmsg/pkg/encoding/seal"
)

func newCodecCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "codec",
		Short: "The element codecs of the encoding layer",
	}
	cmd.AddCommand(newCodecEncodeCmd(), newCodecDecodeCmd())
	cmd.AddCommand(newCodecQueryCmd(), newCodecTrainCmd())
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the codecs --encode takes (and every receiver decodes)",
		Long: `List the codecs --encode takes, one per line: each codec of the registry that
every p2pmsg receiver decodes, then seal, which encrypts (with --psk, or to
the receiving peer's identity). lab codecs also measures stdgzip, Go's
standard-library gzip, as a reference; receivers do not decode it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, n := range encoding.Default().Names() {
				fmt.Fprintln(cmd.OutOrStdout(), n)
			}
			fmt.Fprintln(cmd.OutOrStdout(), seal.Name)
			return nil
		},
	})
	return cmd
}

func newLabCodecsCmd() *cobra.Command {
	var codecs, files, corpus, out string
	var models []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "codecs",
		Short: "Compressed size and speed of each codec, side by side, one thread",
		Long: `Measure every codec (name[:level][@model]) on the seven employee documents of the
Compression Pipe Adapter study (or the --corpus named), or on the given files:
bytes out, compress and decompress throughput, in one process on one thread.
A codec may name a built-in model (xml@employees, zstd:19@dataset) or a
trained one by its ID (xml@7) given with --model (see ` + "`p2pmsg codec train`" + `).

Codecs by default: ` + strings.Join(codecbench.DefaultSpecs, ","),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			start := provenance.Begin()
			undoOut := func() {}
			defer func() { undoOnFailure(&err, undoOut) }() // after exitOnSignal sets err
			// Installed first: reading --files may block (a FIFO).
			ctx, stop := interrupt.Context(cmd.Context())
			defer stop()
			defer exitOnSignal(ctx, &err)
			specs := codecbench.DefaultSpecs
			if codecs != "" {
				specs = strings.Split(codecs, ",")
			}
			inputs, err := codecbench.Corpus(corpus)
			if err != nil {
				return usageError{fmt.Errorf("--corpus %q: want one of %s", corpus, strings.Join(codecbench.Corpora, ", "))}
			}
			if files != "" && cmd.Flags().Changed("corpus") {
				// --files measures the files instead of a corpus: a
				// --corpus beside it would be silently ignored.
				return usageError{fmt.Errorf("--corpus %q and --files: give one (--files measures the files instead of a corpus)", corpus)}
			}
			if files != "" {
				inputs = nil
				for _, f := range strings.Split(files, ",") {
					fh, err := os.Open(f)
					if err != nil {
						return err
					}
					b, err := readLimited(fh, 256<<20, f)
					fh.Close()
					if err != nil {
						return err
					}
					inputs = append(inputs, codecbench.Input{Name: filepath.Base(f), Data: b})
				}
			}
			var keys codecKeys
			if err := keys.load("", nil, models); err != nil {
				return err
			}
			if undoOut, err = prepareOutDir(out); err != nil {
				return err
			}
			res, err := codecbench.Run(ctx, specs, inputs, codecbench.WithModels(&keys.models))
			if errors.Is(err, encoding.ErrSpec) { // found before measuring
				return usageError{missingModel(err)}
			}
			if err != nil {
				return err
			}
			return writeRows(cmd, res, asJSON, func(w io.Writer, res []codecbench.Result) error {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
				fmt.Fprintln(tw, "codec\tfile\tbytes in\tbytes out\tcompress\tdecompress\t")
				for _, r := range res {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t\n", r.Codec, r.File, r.BytesIn, r.BytesOut,
						formatRate(r.CompressBps), formatRate(r.DecompressBps))
				}
				return tw.Flush()
			}, out, "codecs", start)
		},
	}
	f := cmd.Flags()
	f.StringVar(&codecs, "codecs", "", "comma-separated codecs name[:level][@model] (default: all)")
	f.StringVar(&files, "files", "", "comma-separated files to measure instead of a --corpus")
	f.StringVar(&corpus, "corpus", "employees", "documents to measure: "+strings.Join(codecbench.Corpora, ", ")+" (dataset: SOAP/DataSet query results)")
	f.StringArrayVar(&models, "model", nil, modelUsage)
	f.BoolVar(&asJSON, "json", false, "print one JSON object per line")
	f.StringVar(&out, "out", "", outUsage("codecs"))
	return cmd
}
