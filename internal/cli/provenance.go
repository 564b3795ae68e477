package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/p2pmsg/p2pmsg/internal/provenance"
)

// runFile is written beside a lab command's --out files (package
// provenance).
const runFile = provenance.File

// writeRunFile writes dir's run.json for the run of cmd (a command
// without arguments) that started at start and ends now: the command
// line that repeats it is the command's path and every flag given, as
// --name=value. The command took start (provenance.Begin) when it began.
func writeRunFile(dir string, cmd *cobra.Command, start provenance.Start) error {
	line := strings.Fields(cmd.CommandPath())
	cmd.Flags().Visit(func(f *pflag.Flag) { line = append(line, "--"+f.Name+"="+f.Value.String()) })
	return provenance.Write(dir, provenance.New(line, start))
}

// writeRows prints a lab command's rows on stdout, as JSON lines when
// asJSON and else as table prints them. With out (--out DIR) not empty it
// first writes them into out too: NAME.jsonl, the table as NAME.txt, and
// run.json for the run that started at start.
func writeRows[T any](cmd *cobra.Command, rows []T, asJSON bool, table func(io.Writer, []T) error, out, name string, start provenance.Start) error {
	if out != "" {
		var j, txt bytes.Buffer
		if err := writeJSONLines(&j, rows); err != nil {
			return err
		}
		if err := table(&txt, rows); err != nil {
			return err
		}
		for file, b := range map[string][]byte{name + ".jsonl": j.Bytes(), name + ".txt": txt.Bytes()} {
			if err := os.WriteFile(filepath.Join(out, file), b, 0o644); err != nil {
				return err
			}
		}
		if err := writeRunFile(out, cmd, start); err != nil {
			return err
		}
	}
	if asJSON {
		return writeJSONLines(cmd.OutOrStdout(), rows)
	}
	return table(cmd.OutOrStdout(), rows)
}

// outUsage is the help of a table command's --out flag.
func outUsage(name string) string {
	return "also write " + name + ".jsonl (one JSON object per row), " + name + ".txt (the table) and " + runFile + " into this directory"
}
