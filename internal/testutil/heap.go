package testutil

import "runtime"

// LiveHeap returns the bytes of live heap objects after a collection: what
// adversarial tests bound a node's memory by.
func LiveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
