// Command swarm is the Testground plan of p2pmsg's swarm cases: one
// instance per peer, each running internal/swarm's RunPeer, meeting the
// others through the sync service. Instance 1 writes the case's results.
package main

import "github.com/testground/sdk-go/run"

func main() {
	run.InvokeMap(map[string]interface{}{
		"propagate": runCase,
		"resolve":   runCase,
		"relay":     runCase,
		"churn":     runCase,
	})
}
