package alloc

import "math/bits"

// The allocator's size constants, those of PyTorch's CUDACachingAllocator.
const (
	// MinBlockSize: every request is rounded up to at least this and, without
	// power-of-two divisions, to a multiple of it.
	MinBlockSize = 512
	// SmallSize: rounded requests of at most this size use the small pool.
	SmallSize = 1 << 20
	// SmallBuffer is the segment size of the small pool.
	SmallBuffer = 2 << 20
	// MinLargeAlloc: large requests below this get a LargeBuffer segment.
	MinLargeAlloc = 10 << 20
	// LargeBuffer is the segment size for large requests below MinLargeAlloc, and the
	// minimum of max_split_size_mb and max_non_split_rounding_mb.
	LargeBuffer = 20 << 20
	// RoundLarge: segments for requests of MinLargeAlloc or more are rounded up to a
	// multiple of it.
	RoundLarge = 2 << 20
	// MaxRequest: requests of this size (1 EiB) or more fail at once with an OOMError
	// that leaves the allocator and its stats untouched, as in PyTorch.
	MaxRequest = 1 << 60

	oneMiB = 1 << 20
	// log2SmallSize is log2(1 MiB), the lower end of the first divisions interval.
	log2SmallSize = 20
)

// poolKind is the size class of a request, block or segment. Its values index the
// per-pool entries of a StatArray.
type poolKind uint8

const (
	smallPool poolKind = 1 // rounded size ≤ SmallSize
	largePool poolKind = 2
)

func (k poolKind) String() string {
	if k == smallPool {
		return "small"
	}
	return "large"
}

// kindOf returns the pool of a rounded request size (get_pool: ≤ 1 MiB is small).
func kindOf(size int64) poolKind {
	if size <= SmallSize {
		return smallPool
	}
	return largePool
}

// roundSize is PyTorch's round_size: below 512 B → 512 B; with d > 1 divisions for the
// request's interval and n > 512·d → the next of d equal steps between two powers of
// two; otherwise up to a multiple of 512 B. divisions is the table of
// Config.RoundupPower2Divisions.
func roundSize(n int64, divisions *[RoundupIntervals]int) int64 {
	if n < MinBlockSize {
		return MinBlockSize
	}
	if d := int64(divisions[divisionsIndex(n)]); d > 1 && n > MinBlockSize*d {
		return roundupPower2NextDivision(n, d)
	}
	return (n + MinBlockSize - 1) &^ (MinBlockSize - 1)
}

// divisionsIndex is the divisions interval of a request of n > 0 bytes:
// clamp(floor(log2 n) − 20, 0, 15).
func divisionsIndex(n int64) int {
	return min(max(bits.Len64(uint64(n))-1-log2SmallSize, 0), RoundupIntervals-1)
}

// roundupPower2NextDivision rounds n up to the next multiple of floor_pow2(n)/d; a power
// of two stays as it is; when the step would be 0, the next power of two.
func roundupPower2NextDivision(n, d int64) int64 {
	if n&(n-1) == 0 {
		return n
	}
	floor := int64(1) << (bits.Len64(uint64(n)) - 1)
	step := floor >> (bits.Len64(uint64(d)) - 1)
	if step == 0 {
		return floor << 1
	}
	return (n + step - 1) &^ (step - 1)
}

// allocationSize is PyTorch's get_allocation_size: the segment size requested for a
// rounded size s that found no cached block.
func allocationSize(s int64) int64 {
	switch {
	case s <= SmallSize:
		return SmallBuffer
	case s < MinLargeAlloc:
		return LargeBuffer
	}
	return (s + RoundLarge - 1) &^ (RoundLarge - 1)
}
