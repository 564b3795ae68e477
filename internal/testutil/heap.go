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

// Allocated returns the bytes f allocated, counted by the runtime
// whether or not they are still live: what a memory bound on one call
// (a codec's first encode) is checked against.
func Allocated(f func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}
