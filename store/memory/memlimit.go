package memory

import (
	"math"
	"runtime/metrics"
)

// limitHeadroom is the least room MemoryLimit leaves above the store for
// garbage and the rest of the process.
const limitHeadroom = 16 << 20

// MemoryLimit returns a soft memory limit for a process whose memory is
// mostly a Store of Config.MaxBytes maxBytes (0: DefaultMaxBytes), to
// pass to runtime/debug.SetMemoryLimit: the memory the Go runtime holds
// now, plus maxBytes, plus a quarter of maxBytes (at least 16 MiB) for
// garbage and whatever else the process allocates later. Without a
// limit, Go's collector lets the heap grow to twice what is live
// (GOGC=100) before it collects, so a store at its cap, whose live heap
// is about MaxBytes, can make a process hold twice that. For a store with
// no cap (maxBytes negative) it returns math.MaxInt64: no limit.
//
// Call it early, when the process holds little besides the runtime.
func MemoryLimit(maxBytes int64) int64 {
	switch {
	case maxBytes < 0:
		return math.MaxInt64
	case maxBytes == 0:
		maxBytes = DefaultMaxBytes
	}
	return goMemory() + maxBytes + max(maxBytes/4, limitHeadroom)
}

// goMemory returns the memory the Go runtime holds, as its memory limit
// counts it: all it mapped, less the heap it gave back to the system.
func goMemory() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64()) - int64(s[1].Value.Uint64())
}
