// Package alloctest is the conformance suite of the caching allocator over a device:
// alloctest.Run(t, newTarget) runs the allocator's features on whatever device newTarget
// returns, so the same checks run on the CPU, the simulated device and a GPU (package
// alloc's tests run it on cpu and sim, device/cuda's on the GPU). The features: exact
// statistics, pools and segment sizes, splitting and merging, EmptyCache giving memory
// back to the device, expandable segments through device.VirtualMemory, RecordStream
// across two streams with deferred frees, the memory fraction against the device's
// capacity, out of memory from the device with release and retry, and many goroutines
// at once.
//
// Invariants of the suite:
//   - It relies only on what package alloc promises for every device, and observes the
//     device through Target.InUse, MemInfo (exactly only where Target.ExactMemInfo) and,
//     where Target.KeepsData, copies back to the host.
//   - Each subtest makes its own allocator with alloc.New over the target's device and
//     ends, in a cleanup that runs after every cleanup the subtest registered later, by
//     asserting that nothing is allocated, that EmptyCache leaves nothing reserved and
//     that the device holds what it held when the subtest began. A subtest that failed
//     gives back what it still holds instead, so a device shared by subtests (a GPU)
//     starts the next one clean.
package alloctest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
)

// Target is one device the suite runs on, and what the suite may expect of it.
type Target struct {
	// Dev is the device. It may be shared between subtests; each leaves it as it found
	// it.
	Dev device.Device
	// InUse returns the bytes of memory Dev has handed out (Malloc and mapped pieces)
	// and not taken back, as the device itself counts them.
	InUse func() int64
	// ExactMemInfo: nothing but this suite changes Dev's MemInfo free bytes, and every
	// Malloc or Map of a multiple of 2 MiB lowers them by exactly its size.
	ExactMemInfo bool
	// KeepsData: copies and memsets move bytes, so the suite checks that the blocks it
	// is given hold what was written to them (overlapping blocks would not).
	KeepsData bool
	// Hold, when not nil, keeps stream s busy: events recorded on s after Hold returns
	// stay pending until release is called. Memory it takes must be given back by the
	// end of the subtest (t.Cleanup will do). nil for devices whose work completes at
	// once (cpu): deferred frees are then checked without a pending phase.
	Hold func(t *testing.T, s device.Stream) (release func())
}

// Run runs the suite. newTarget is called once per subtest and may register cleanups
// on the t it is given (closing the device, say); they run after the subtest's checks.
func Run(t *testing.T, newTarget func(t *testing.T) Target) {
	s := suite{newTarget}
	t.Run("AllocFreeStats", s.allocFreeStats)
	t.Run("PoolsAndSegments", s.poolsAndSegments)
	t.Run("SplitMerge", s.splitMerge)
	t.Run("EmptyCache", s.emptyCache)
	t.Run("ExpandableSegments", s.expandableSegments)
	t.Run("RecordStream", s.recordStream)
	t.Run("MemoryFraction", s.memoryFraction)
	t.Run("OutOfMemory", s.outOfMemory)
	t.Run("Concurrency", s.concurrency)
}

type suite struct {
	newTarget func(t *testing.T) Target
}

// session is one subtest's target and allocator.
type session struct {
	t *testing.T
	Target
	a *alloc.Allocator
	// inUse0, free0 and total are the device's state when the subtest began.
	inUse0, free0, total int64
	// live maps the allocations made through alloc and not yet freed to their sizes.
	live map[device.Ptr]int64
}

// open makes the subtest's allocator with cfg and registers the final checks.
func (s suite) open(t *testing.T, cfg alloc.Config) *session {
	tg := s.newTarget(t)
	require.NotNil(t, tg.Dev, "Target.Dev")
	require.NotNil(t, tg.InUse, "Target.InUse")
	free, total, err := tg.Dev.MemInfo()
	require.NoError(t, err)
	require.Positive(t, total)
	a, err := alloc.New(tg.Dev, cfg)
	require.NoError(t, err)
	x := &session{t: t, Target: tg, a: a, inUse0: tg.InUse(), free0: free, total: total, live: map[device.Ptr]int64{}}
	t.Cleanup(x.finish)
	return x
}

// finish is every subtest's last check (see the package doc).
func (x *session) finish() {
	t := x.t
	if t.Failed() {
		for p := range x.live {
			_ = x.a.Free(p)
		}
		_ = x.a.EmptyCache()
		return
	}
	require.Empty(t, x.live, "allocations the subtest did not free")
	st := x.a.Stats()
	require.Zero(t, cur(st.AllocatedBytes), "allocated bytes at the end")
	require.Zero(t, cur(st.Allocation), "live allocations at the end")
	// Frees waiting for other streams stay active until EmptyCache waits for them.
	require.NoError(t, x.a.EmptyCache())
	st = x.a.Stats()
	require.Zero(t, cur(st.ActiveBytes), "active bytes after EmptyCache")
	require.Zero(t, cur(st.RequestedBytes), "requested bytes after EmptyCache")
	require.Zero(t, cur(st.ReservedBytes), "reserved bytes after EmptyCache")
	require.Zero(t, cur(st.Segment), "segments after EmptyCache")
	require.Empty(t, x.a.Snapshot(), "segments after EmptyCache")
	x.expectDevice(0)
}

// cur is the all-pools current value of a statistic.
func cur(a alloc.StatArray) int64 { return a[alloc.StatAll].Current }

func pool(a alloc.StatArray, k int) int64 { return a[k].Current }

// expectDevice checks that the device holds exactly used bytes more than at the start:
// by its own count, and by MemInfo where that is exact.
func (x *session) expectDevice(used int64) {
	x.t.Helper()
	require.Equal(x.t, x.inUse0+used, x.InUse(), "%s: device bytes in use", x.Dev.Name())
	if x.ExactMemInfo {
		free, total, err := x.Dev.MemInfo()
		require.NoError(x.t, err)
		require.Equal(x.t, x.total, total)
		require.Equal(x.t, x.free0-used, free, "%s: MemInfo free bytes with %d bytes in use", x.Dev.Name(), used)
	}
}

// alloc allocates size bytes on s and checks the alignment.
func (x *session) alloc(size int64, s device.Stream) device.Ptr {
	x.t.Helper()
	p, err := x.a.Alloc(size, s)
	require.NoError(x.t, err, "Alloc(%d, stream %d)", size, s)
	require.NotZero(x.t, p, "Alloc(%d)", size)
	require.Zero(x.t, uintptr(p)%alloc.MinBlockSize, "Alloc(%d) = %#x is not %d-byte aligned", size, uintptr(p), alloc.MinBlockSize)
	_, dup := x.live[p]
	require.False(x.t, dup, "Alloc(%d) = %#x, which is live", size, uintptr(p))
	x.live[p] = size
	return p
}

// allocN allocates n blocks of size bytes on stream 0.
func (x *session) allocN(n int, size int64) []device.Ptr {
	x.t.Helper()
	ps := make([]device.Ptr, n)
	for i := range ps {
		ps[i] = x.alloc(size, 0)
	}
	return ps
}

func (x *session) free(ps ...device.Ptr) {
	x.t.Helper()
	for _, p := range ps {
		require.NoError(x.t, x.a.Free(p), "Free(%#x)", uintptr(p))
		delete(x.live, p)
	}
}

// newStream creates a stream destroyed when the subtest ends, before its final checks.
func (x *session) newStream() device.Stream {
	x.t.Helper()
	s, err := x.Dev.NewStream()
	require.NoError(x.t, err)
	x.t.Cleanup(func() { require.NoError(x.t, x.Dev.DestroyStream(s)) })
	return s
}

// span is a range of device memory.
type span struct {
	p device.Ptr
	n int64
}

// markAll marks each block ps[i] with first+i (see mark), then checks every mark: a
// block that overlaps another loses its mark.
func (x *session) markAll(ps []device.Ptr, first byte) {
	x.t.Helper()
	for i, p := range ps {
		x.mark(p, first+byte(i), 0)
	}
	for i, p := range ps {
		x.checkMark(p, first+byte(i))
	}
}

// mark sets the first and the last KiB of the live block at p (all of it when smaller)
// to v, ordered on s, where the device keeps data.
func (x *session) mark(p device.Ptr, v byte, s device.Stream) {
	x.t.Helper()
	if !x.KeepsData {
		return
	}
	for _, r := range x.ends(p) {
		require.NoError(x.t, x.Dev.Memset(r.p, v, r.n, s))
	}
}

// checkMark checks what mark wrote at p.
func (x *session) checkMark(p device.Ptr, v byte) {
	x.t.Helper()
	if !x.KeepsData {
		return
	}
	for _, r := range x.ends(p) {
		b := make([]byte, r.n)
		require.NoError(x.t, x.Dev.CopyToHost(b, r.p, 0))
		for i, got := range b {
			if got != v {
				require.Failf(x.t, "block overwritten", "block %#x: byte at %#x is %#x, want %#x: another block overlaps it",
					uintptr(p), uintptr(r.p)+uintptr(i), got, v)
			}
		}
	}
}

// ends returns the ranges mark covers for the live block at p.
func (x *session) ends(p device.Ptr) []span {
	n := x.live[p]
	require.Positive(x.t, n, "%#x is not a live allocation of this subtest", uintptr(p))
	if n <= 2*kib {
		return []span{{p, n}}
	}
	return []span{{p, kib}, {p + device.Ptr(n-kib), kib}}
}

// segmentOf returns the snapshot's segment holding p.
func (x *session) segmentOf(p device.Ptr) alloc.SegmentInfo {
	x.t.Helper()
	for _, s := range x.a.Snapshot() {
		if p >= s.Address && p < s.Address+device.Ptr(s.TotalSize) {
			return s
		}
	}
	require.Failf(x.t, "no segment", "no segment holds %#x", uintptr(p))
	return alloc.SegmentInfo{}
}
