// Command tgrun runs a Testground composition of p2pmsg's plans without
// Testground or Docker, as the local:exec runner would:
//
//	go run ./cmd/tgrun run -f amtt/compositions/dsl.toml [-f another.toml]... [--param trials=3] [--out results] [--timeout 10m]
//
// Several -f run one after the other, each plan built once; every
// composition and --param is checked against its plan's manifest first.
// It builds the plan, starts an embedded sync service on 127.0.0.1,
// launches each instance as a process with Testground's runtime
// environment, streams their output prefixed with the instance, fails if
// any instance fails, crashes or times out, and gathers the outputs into
// results/<plan>/<run>/ with the merged tables and chart. `tgrun --help`
// says the rest; internal/tgrun is the command.
package main

import (
	"os"

	"github.com/p2pmsg/p2pmsg/testplans/internal/tgrun"
)

func main() {
	os.Exit(tgrun.Main(os.Args[1:], os.Stdout, os.Stderr))
}
