// Command amtt is the Testground plan of the Compression Pipe Adapter
// study: internal/lab's AMTT engine with the sender and the receiver as two
// instances, the link given by plan parameters.
package main

import "github.com/testground/sdk-go/run"

func main() {
	run.InvokeMap(map[string]interface{}{
		"amtt": runAMTT,
	})
}
