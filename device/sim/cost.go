package sim

import "time"

// CostModel prices the driver calls that get or give back device memory. A pair is one
// Malloc and the Free of the same allocation (or one Map and the Unmap of the same
// piece): Pair(size) is charged half on Malloc (Map) and half on Free (Unmap). Reserve,
// Unreserve, streams, events and copies cost nothing. The zero CostModel costs nothing.
type CostModel struct {
	// PairBase is the cost of a pair of up to Knee bytes.
	PairBase time.Duration
	// Knee is the size up to which a pair costs PairBase.
	Knee int64
	// PerGiB is added per GiB beyond Knee.
	PerGiB time.Duration
}

// H200Cost is cuMemAlloc+cuMemFree as measured on the H200 with driver 580 (2026-11-30):
// about 58 µs per pair from 512 B to 20 MiB, and 1.25 ms per GiB beyond (the linear model
// gives 1.28 ms for a 1 GiB pair, where 1.25 ms was measured).
func H200Cost() CostModel {
	return CostModel{PairBase: 58 * time.Microsecond, Knee: 20 << 20, PerGiB: 1250 * time.Microsecond}
}

// Pair is the cost of a pair of size bytes.
func (c CostModel) Pair(size int64) time.Duration {
	d := c.PairBase
	if size > c.Knee {
		d += time.Duration(float64(c.PerGiB) * float64(size-c.Knee) / (1 << 30))
	}
	return d
}

// acquire is what Malloc (or Map) is charged: half a pair.
func (c CostModel) acquire(size int64) time.Duration { return c.Pair(size) / 2 }

// release is what Free (or Unmap) is charged: the rest of the pair.
func (c CostModel) release(size int64) time.Duration { return c.Pair(size) - c.acquire(size) }
