// Package swarm is the engine of the swarm cases: many p2pmsg peers on
// loopback, each with its own host, endpoint, pipe service and DHT, in one
// process (Run, behind `p2pmsg lab swarm`) or one peer per process (RunPeer,
// behind the Testground plan testplans/swarm, which meets its peers through
// a Coordinator).
//
// It sits above every layer (pkg/node, pkg/endpoint, pkg/pipe) and, unlike
// package lab, imports nothing a peer does not run: a plan instance is one
// peer, and fifty of them share a machine, so what its binary links and
// initialises is paid fifty times. The latency chart is in package chart.
package swarm
