package cli

import (
	"strings"
	"time"

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
// --name=value.
func writeRunFile(dir string, cmd *cobra.Command, start time.Time) error {
	line := strings.Fields(cmd.CommandPath())
	cmd.Flags().Visit(func(f *pflag.Flag) { line = append(line, "--"+f.Name+"="+f.Value.String()) })
	return provenance.Write(dir, provenance.New(line, start))
}
