package alloc

import "github.com/subletml/sublet/device"

// sig is one allocator event as the planned policy compares them: the allocation of v > 0
// bytes on stream s, or (v < 0, s 0) the free of the allocation made −v allocations
// before the free. A training step repeats its sigs exactly: the same sizes in the same
// order, each tensor freed the same number of allocations after it was made.
type sig struct {
	v int64
	s device.Stream
}

func allocSig(size int64, s device.Stream) sig { return sig{size, s} }

func freeSig(distance int64) sig { return sig{-distance, 0} }

// Period detection. Every event's sig enters a ring; a hash of the last detectWindow
// sigs indexes a table of where that window was last seen, which proposes a period: the
// distance back to it. A proposed period P holds while each new sig equals the one P
// events before; once P events in a row have (the last period repeats the one before),
// it is confirmed. Hash collisions only propose periods that fail at once.
const (
	detectWindow = 8
	// maxPeriod is the longest period detected, in events (allocations and frees).
	maxPeriod = 1 << 15
	histCap   = 2 * maxPeriod
	tableBits = 12
	// hashBase is the rolling hash's multiplier; hashBaseW is hashBase^detectWindow.
	hashBase = 0x100000001b3
)

var hashBaseW = func() uint64 {
	x := uint64(1)
	for range detectWindow {
		x *= hashBase
	}
	return x
}()

// detector finds the period of the event sequence. Guarded by Allocator.mu.
type detector struct {
	// hist holds the last histCap sigs; event i (0-based) is at hist[i%histCap].
	hist []sig
	// n counts the events seen.
	n int64
	// h is the rolling hash of the last detectWindow sigs.
	h uint64
	// table maps a window hash to n just after the last event whose window had it.
	table []int64
	// period is the period proposed (0: none); run counts the latest events in a row
	// equal to the one period before.
	period, run int64
}

func (x sig) hash() uint64 {
	return (uint64(x.v)*0x9e3779b97f4a7c15 ^ uint64(x.s)*0xc2b2ae3d27d4eb4f) | 1
}

// at returns event i, which must be among the last histCap.
func (d *detector) at(i int64) sig { return d.hist[i%histCap] }

// push adds the next event and reports whether it completes a confirmed period: the
// last d.period events equal the d.period before them.
func (d *detector) push(x sig) bool {
	if d.hist == nil {
		d.hist = make([]sig, histCap)
		d.table = make([]int64, 1<<tableBits)
	}
	d.h = d.h*hashBase + x.hash()
	if d.n >= detectWindow {
		d.h -= d.at(d.n-detectWindow).hash() * hashBaseW
	}
	d.hist[d.n%histCap] = x
	d.n++
	if d.period > 0 {
		if x == d.at(d.n-1-d.period) {
			d.run++
		} else {
			d.period, d.run = 0, 0
		}
	}
	slot := &d.table[d.h>>(64-tableBits)]
	if d.period == 0 && *slot > 0 && d.n >= detectWindow {
		if p := d.n - *slot; p <= maxPeriod {
			d.propose(p)
		}
	}
	*slot = d.n
	return d.period > 0 && d.run >= d.period
}

// propose makes p the period if the latest events agree with it (a window's worth, or
// a whole period when shorter), counting how many in a row do, up to a full period:
// enough to confirm it.
func (d *detector) propose(p int64) {
	run := int64(0)
	for run < p && d.n-1-run-p >= 0 && d.n-1-run-p >= d.n-histCap && d.at(d.n-1-run) == d.at(d.n-1-run-p) {
		run++
	}
	if run >= min(p, detectWindow) {
		d.period, d.run = p, run
	}
}

// window returns the last 2p events, oldest first.
func (d *detector) window(p int64) []sig {
	out := make([]sig, 2*p)
	for i := range out {
		out[i] = d.at(d.n - 2*p + int64(i))
	}
	return out
}
