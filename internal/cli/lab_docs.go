package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/p2pmsg/p2pmsg/internal/lab"
)

// exampleDocs are the documents `lab docs` writes: the files the README's
// and docs/'s examples name, each one of the experiments' own documents
// (lab.LoadGridDoc), so the same name always holds the same bytes.
var exampleDocs = []struct {
	file, doc, what string
}{
	{"doc.xml", "employees-100", "the Compression Pipe Adapter study's employees document, 100 records"},
	{"report.xml", "dataset-110", "a SOAP web service's .NET DataSet answer, 110 order rows"},
	{"big.xml", "employees-1000", "the study's largest employees document, 1000 records"},
}

func newLabDocsCmd() *cobra.Command {
	var (
		out   string
		force bool
	)
	cmd := &cobra.Command{
		Use:   "docs --out DIR",
		Short: "Write the example documents the README's commands use",
		Long: `Write the documents the README's examples use into DIR (created if need
be): doc.xml, report.xml and big.xml, generated from the experiments' own
corpora, byte for byte the same on every machine and run. A file that is
already there with other bytes is left alone and the command fails, unless
--force.`,
		Example: `  p2pmsg lab docs --out try && cd try`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageError{errors.New("--out is required")}
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			for _, d := range exampleDocs {
				g, err := lab.LoadGridDoc(d.doc)
				if err != nil {
					return err
				}
				path := filepath.Join(out, d.file)
				if err := writeExampleDoc(path, g.Data, force); err != nil {
					return err
				}
				fmt.Fprintf(tw, "%s\t%d bytes\t%s: %s\n", path, len(g.Data), d.doc, d.what)
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "directory to write the documents into (required)")
	f.BoolVar(&force, "force", false, "overwrite files of the same names that hold other bytes")
	return cmd
}

// writeExampleDoc writes data to path unless a different file is there
// and force is false. A file already holding data is left as it is.
func writeExampleDoc(path string, data []byte, force bool) error {
	old, err := os.ReadFile(path)
	switch {
	case err == nil && bytes.Equal(old, data):
		return nil
	case err == nil && !force:
		return fmt.Errorf("%s exists with other content (--force overwrites it)", path)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
