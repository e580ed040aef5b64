package alloc

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

const (
	KiB = int64(1) << 10
	MiB = int64(1) << 20
	GiB = int64(1) << 30
)

// newSim returns a meta simulated device of capacity bytes (0: the H200's) whose raw
// allocations cost nothing.
func newSim(t testing.TB, capacity int64) *sim.Device {
	t.Helper()
	d, err := sim.New(sim.Options{Capacity: capacity, Cost: &sim.CostModel{}})
	require.NoError(t, err)
	return d
}

// newAlloc returns an allocator over a fresh simulated device.
func newAlloc(t testing.TB, capacity int64, cfg Config) (*Allocator, *sim.Device) {
	t.Helper()
	d := newSim(t, capacity)
	a, err := New(d, cfg)
	require.NoError(t, err)
	return a, d
}

// newStream creates a stream on d, held (its events stay pending) when held is true.
func newStream(t testing.TB, d *sim.Device, held bool) device.Stream {
	t.Helper()
	s, err := d.NewStream()
	require.NoError(t, err)
	if held {
		require.NoError(t, d.HoldStream(s))
	}
	return s
}

func mustAlloc(t testing.TB, a *Allocator, size int64, s device.Stream) device.Ptr {
	t.Helper()
	p, err := a.Alloc(size, s)
	require.NoError(t, err, "Alloc(%d, stream %d)", size, s)
	return p
}

func mustFree(t testing.TB, a *Allocator, ps ...device.Ptr) {
	t.Helper()
	for _, p := range ps {
		require.NoError(t, a.Free(p))
	}
}

// requireDrained frees nothing: it asserts that no allocation is live, and that after
// EmptyCache (which waits for the events of blocks freed after RecordStream: until then
// they are still active) the allocator holds nothing and the device has nothing in use.
func requireDrained(t testing.TB, a *Allocator, d *sim.Device) {
	t.Helper()
	checkInvariants(t, a)
	st := a.Stats()
	require.Zero(t, st.AllocatedBytes[StatAll].Current, "allocated bytes at the end")
	require.NoError(t, a.EmptyCache())
	checkInvariants(t, a)
	st = a.Stats()
	require.Zero(t, st.ActiveBytes[StatAll].Current, "active bytes after EmptyCache")
	require.Zero(t, st.ReservedBytes[StatAll].Current, "reserved bytes after EmptyCache")
	require.Zero(t, d.Stats().InUse, "device bytes in use after EmptyCache")
}

// cur returns the current value of a StatArray's aggregate.
func cur(a StatArray) int64 { return a[StatAll].Current }

// checkInvariants verifies the package invariants by recounting every structure.
func checkInvariants(t testing.TB, a *Allocator) {
	t.Helper()
	if err := invariantError(a); err != nil {
		t.Fatal(err)
	}
}

func invariantError(a *Allocator) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var want Stats
	want.MaxSplitSize = a.stats.MaxSplitSize
	freeSeen := map[*block]bool{}
	unmappedSeen := map[*block]bool{}
	allocated := 0
	pendingEvents := 0
	deferred := map[*block]bool{}
	for _, b := range a.events.deferred {
		if b.allocated || b.eventCount > 0 || len(b.streamUses) == 0 || deferred[b] {
			return fmt.Errorf("deferred block %#x is allocated, has events, has no stream use, or is deferred twice", b.addr)
		}
		deferred[b] = true
	}

	var reserved int64
	for i, seg := range a.segments {
		if seg.index != i {
			return fmt.Errorf("segment %#x has index %d at position %d", seg.base, seg.index, i)
		}
		k := seg.kind
		if !seg.expandable {
			want.Segment.increase(k, 1)
			want.ReservedBytes.increase(k, seg.size)
			reserved += seg.size
			if seg.size >= a.maxSplit {
				want.OversizeSegments.increase(1)
			}
		}
		if seg.head == nil || seg.head.prev != nil {
			return fmt.Errorf("segment %#x: bad head", seg.base)
		}
		addr := seg.base
		var prev *block
		for b := seg.head; b != nil; prev, b = b, b.next {
			switch {
			case b.seg != seg:
				return fmt.Errorf("block %#x is in segment %#x but points to another", b.addr, seg.base)
			case b.prev != prev:
				return fmt.Errorf("block %#x: prev link broken", b.addr)
			case b.addr != addr:
				return fmt.Errorf("segment %#x: block at %#x, want %#x (gap or overlap)", seg.base, b.addr, addr)
			case b.size <= 0:
				return fmt.Errorf("block %#x has size %d", b.addr, b.size)
			case !b.mapped && !seg.expandable:
				return fmt.Errorf("unmapped block %#x in a raw segment", b.addr)
			case b.allocated && !b.mapped:
				return fmt.Errorf("allocated block %#x is unmapped", b.addr)
			case b.allocated && b.eventCount > 0:
				return fmt.Errorf("allocated block %#x has pending events", b.addr)
			case !b.allocated && len(b.streamUses) > 0 && !deferred[b]:
				return fmt.Errorf("free block %#x has stream uses and is not deferred to a capture's end", b.addr)
			}
			if prev != nil && prev.allocatable() && b.allocatable() && prev.mapped == b.mapped {
				return fmt.Errorf("adjacent free blocks %#x and %#x were not merged", prev.addr, b.addr)
			}
			if seg.expandable && b.mapped {
				if int64(b.addr-seg.base)%seg.page != 0 && (prev == nil || !prev.mapped) {
					return fmt.Errorf("mapped range at %#x does not start on a page", b.addr)
				}
				want.ReservedBytes.increase(k, b.size)
				reserved += b.size
			}
			if ar := b.arena; ar != nil {
				n, err := checkArena(a, b, &want)
				if err != nil {
					return err
				}
				allocated += n
				addr += device.Ptr(b.size)
				continue
			}
			active := b.allocated || b.eventCount > 0 || deferred[b]
			if b.allocated {
				allocated++
				if a.ptrs.get(b.addr) != b {
					return fmt.Errorf("allocated block %#x missing from the pointer map", b.addr)
				}
				want.Allocation.increase(k, 1)
				want.AllocatedBytes.increase(k, b.size)
				if b.size >= a.maxSplit {
					want.OversizeAllocations.increase(1)
				}
			}
			if active {
				want.Active.increase(k, 1)
				want.ActiveBytes.increase(k, b.size)
				want.RequestedBytes.increase(k, b.requested)
				pendingEvents += int(b.eventCount)
			} else if b.mapped {
				freeSeen[b] = false
				if b.isSplit() && !seg.expandable {
					want.InactiveSplit.increase(k, 1)
					want.InactiveSplitBytes.increase(k, b.size)
				}
			} else {
				unmappedSeen[b] = false
			}
			addr += device.Ptr(b.size)
		}
		if addr != seg.base+device.Ptr(seg.size) {
			return fmt.Errorf("segment %#x of %d bytes: blocks end at %#x", seg.base, seg.size, addr)
		}
	}
	if a.ptrs.n != allocated {
		return fmt.Errorf("pointer map holds %d blocks, segments %d allocated", a.ptrs.n, allocated)
	}
	if pendingEvents != a.events.pending {
		return fmt.Errorf("blocks wait for %d events, queues hold %d", pendingEvents, a.events.pending)
	}
	states := a.streams
	for _, p := range a.pools {
		states = append(slices.Clip(states), p.streams...)
	}
	for _, ss := range states {
		for k := smallPool; k <= largePool; k++ {
			set := &ss.free[k]
			n := 0
			var last *freeEntry
			for _, ch := range set.chunks {
				if (ch.n == 0 && (set.n > 0 || len(set.chunks) > 1)) || ch.n > chunkCap {
					return fmt.Errorf("free set chunk with %d entries (%d chunks, %d blocks)", ch.n, len(set.chunks), set.n)
				}
				for i := 0; i < ch.n; i++ {
					e := &ch.e[i]
					b := e.b
					seen, ok := freeSeen[b]
					switch {
					case !ok:
						return fmt.Errorf("free set of stream %d holds block %#x that is not free", ss.stream, e.addr)
					case seen:
						return fmt.Errorf("block %#x is twice in free sets", b.addr)
					case b.seg.ss != ss || b.kind() != k:
						return fmt.Errorf("block %#x is in the wrong free set", b.addr)
					case e.size != b.size || e.addr != b.addr:
						return fmt.Errorf("free set entry (%d, %#x) does not match its block (%d, %#x)", e.size, e.addr, b.size, b.addr)
					case last != nil && keyBefore(last, e.size, e.addr) == 0:
						return fmt.Errorf("free set out of order at %#x", e.addr)
					}
					freeSeen[b] = true
					last = e
					n++
				}
			}
			if n != set.n {
				return fmt.Errorf("free set counts %d, holds %d", set.n, n)
			}
			for i, b := range ss.unmapped[k] {
				seen, ok := unmappedSeen[b]
				if !ok || seen || b.seg.ss != ss || b.kind() != k || (i > 0 && ss.unmapped[k][i-1].addr >= b.addr) {
					return fmt.Errorf("unmapped list of stream %d is wrong at %#x", ss.stream, b.addr)
				}
				unmappedSeen[b] = true
			}
		}
	}
	for b, seen := range freeSeen {
		if !seen {
			return fmt.Errorf("free block %#x is in no free set", b.addr)
		}
	}
	for b, seen := range unmappedSeen {
		if !seen {
			return fmt.Errorf("unmapped block %#x is in no unmapped list", b.addr)
		}
	}
	if a.totalAllocated != reserved {
		return fmt.Errorf("totalAllocated %d, segments and mapped pages hold %d", a.totalAllocated, reserved)
	}
	got := a.stats
	for _, x := range []struct {
		name      string
		got, want *StatArray
	}{
		{"allocation", &got.Allocation, &want.Allocation},
		{"segment", &got.Segment, &want.Segment},
		{"active", &got.Active, &want.Active},
		{"inactive_split", &got.InactiveSplit, &want.InactiveSplit},
		{"allocated_bytes", &got.AllocatedBytes, &want.AllocatedBytes},
		{"reserved_bytes", &got.ReservedBytes, &want.ReservedBytes},
		{"active_bytes", &got.ActiveBytes, &want.ActiveBytes},
		{"inactive_split_bytes", &got.InactiveSplitBytes, &want.InactiveSplitBytes},
		{"requested_bytes", &got.RequestedBytes, &want.RequestedBytes},
	} {
		for i := range x.got {
			if x.got[i].Current != x.want[i].Current {
				return fmt.Errorf("%s.%s.current is %d, recount %d", x.name, poolNames[i], x.got[i].Current, x.want[i].Current)
			}
			if x.got[i].Peak < x.got[i].Current {
				return fmt.Errorf("%s.%s.peak %d below current %d", x.name, poolNames[i], x.got[i].Peak, x.got[i].Current)
			}
		}
	}
	if got.OversizeAllocations.Current != want.OversizeAllocations.Current || got.OversizeSegments.Current != want.OversizeSegments.Current {
		return fmt.Errorf("oversize stats (%d, %d), recount (%d, %d)", got.OversizeAllocations.Current, got.OversizeSegments.Current,
			want.OversizeAllocations.Current, want.OversizeSegments.Current)
	}
	return nil
}

// checkArena checks arena block b of the planned policy: allocated, holding its live
// slots inside it without overlap, each in the pointer map. It counts the slots in want
// and returns how many are live.
func checkArena(a *Allocator, b *block, want *Stats) (int, error) {
	ar := b.arena
	if ar.block != b || !b.allocated || !b.mapped || a.ptrs.get(b.addr) == b {
		return 0, fmt.Errorf("arena block %#x: not its arena's, not allocated, unmapped, or in the pointer map", b.addr)
	}
	k := b.kind()
	end := b.addr
	n := 0
	for _, s := range ar.live() {
		switch {
		case s.arena != ar || s.seg != b.seg || !s.mapped:
			return 0, fmt.Errorf("arena %#x: slot %#x belongs elsewhere", b.addr, s.addr)
		case s.addr < end:
			return 0, fmt.Errorf("arena %#x: live slot %#x overlaps the one before (ends %#x) or starts before the arena", b.addr, s.addr, end)
		case a.ptrs.get(s.addr) != s:
			return 0, fmt.Errorf("arena %#x: live slot %#x missing from the pointer map", b.addr, s.addr)
		}
		end = s.addr + device.Ptr(s.size)
		n++
		want.Allocation.increase(k, 1)
		want.AllocatedBytes.increase(k, s.size)
		want.Active.increase(k, 1)
		want.ActiveBytes.increase(k, s.size)
		want.RequestedBytes.increase(k, s.requested)
		if s.size >= a.maxSplit {
			want.OversizeAllocations.increase(1)
		}
	}
	if end > b.addr+device.Ptr(b.size) {
		return 0, fmt.Errorf("arena %#x of %d bytes: a slot ends at %#x, past it", b.addr, b.size, end)
	}
	return n, nil
}
