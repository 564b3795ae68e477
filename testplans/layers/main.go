// Command layers is the Testground plan of the per-layer round-trip study
// (Jan & Noblet): internal/lab's RTT engine over the layers the run names.
package main

import "github.com/testground/sdk-go/run"

func main() {
	run.InvokeMap(map[string]interface{}{
		"rtt": runRTT,
	})
}
