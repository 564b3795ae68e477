package wire

import (
	"unicode/utf16"
)

// javaStringHash is java.lang.String.hashCode: s[0]*31^(n-1) + ... over
// UTF-16 code units, in 32-bit arithmetic.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r < 0x10000 {
			h = 31*h + int32(r)
			continue
		}
		hi, lo := utf16.EncodeRune(r)
		h = 31*h + int32(hi)
		h = 31*h + int32(lo)
	}
	return h
}

// javaSpread is java.util.HashMap.hash: the high half folded into the low.
func javaSpread(s string) uint32 {
	h := uint32(javaStringHash(s))
	return h ^ (h >> 16)
}

// javaHashMapOrder returns keys (distinct, in insertion order) in the order
// a java.util.HashMap created with default capacity and load factor iterates
// them after they were put in that order. It simulates the table's growth,
// including the early resize HashMap does instead of treeifying a crowded
// bin in a table smaller than 64 slots; tree bins themselves are not
// modelled (see the package doc).
func javaHashMapOrder(keys []string, out []string) []string {
	const treeifyThreshold, minTreeifyCapacity = 8, 64
	n := 16
	threshold := 12
	counts := make(map[uint32]int) // bin population, keyed by index in current table
	hashes := make([]uint32, len(keys))
	for i, k := range keys {
		hashes[i] = javaSpread(k)
	}
	recount := func(upto int) {
		clear(counts)
		for j := 0; j < upto; j++ {
			counts[hashes[j]&uint32(n-1)]++
		}
	}
	for i := range keys {
		idx := hashes[i] & uint32(n-1)
		before := counts[idx]
		counts[idx]++
		// putVal appends to a bin of 'before' nodes; with binCount >= 7
		// (the bin already held 8) it calls treeifyBin, which only resizes
		// while the table is small.
		if before >= treeifyThreshold && n < minTreeifyCapacity {
			n *= 2
			threshold *= 2
			recount(i + 1)
		}
		if i+1 > threshold {
			n *= 2
			threshold *= 2
			recount(i + 1)
		}
	}
	out = append(out[:0], keys...)
	mask := uint32(n - 1)
	// Stable insertion sort by bucket: the sets are small (<= 255).
	for i := 1; i < len(out); i++ {
		k, b := out[i], javaSpread(out[i])&mask
		j := i
		for j > 0 && javaSpread(out[j-1])&mask > b {
			out[j] = out[j-1]
			j--
		}
		out[j] = k
	}
	return out
}
