// Command p2pmsg is the p2pmsg command-line tool: encode and decode JXTA
// messages, write and read pipe advertisements, and (as the project grows)
// send, receive and measure. All logic lives in internal/cli and pkg/.
package main

import (
	"os"

	"github.com/p2pmsg/p2pmsg/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
