package alloc

import (
	"slices"
	"strings"
)

// Stat is one statistic, as in PyTorch's memory_stats().
type Stat struct {
	// Current is the present value.
	Current int64
	// Peak is the highest Current since creation or the last ResetPeakStats.
	Peak int64
	// Allocated is the sum of all increases since creation or the last
	// ResetAccumulatedStats.
	Allocated int64
	// Freed is the sum of all decreases over the same span.
	Freed int64
}

func (s *Stat) increase(n int64) {
	s.Current += n
	s.Allocated += n
	if s.Current > s.Peak {
		s.Peak = s.Current
	}
}

func (s *Stat) decrease(n int64) {
	s.Current -= n
	s.Freed += n
}

// StatArray is a Stat for all pools together and for each pool, indexed by StatAll,
// StatSmallPool and StatLargePool (PyTorch's order: aggregate, small, large).
type StatArray [3]Stat

// Indices of a StatArray.
const (
	StatAll       = 0
	StatSmallPool = int(smallPool)
	StatLargePool = int(largePool)
)

func (a *StatArray) increase(k poolKind, n int64) {
	a[StatAll].increase(n)
	a[k].increase(n)
}

func (a *StatArray) decrease(k poolKind, n int64) {
	a[StatAll].decrease(n)
	a[k].decrease(n)
}

// Stats is the allocator's statistics, PyTorch's DeviceStats. Counts and bytes are
// those PyTorch reports under the same names; see StatsMap for the flat form.
type Stats struct {
	// Allocation counts live allocations (decremented when Free is called).
	Allocation StatArray
	// Segment counts raw device allocations (expandable segments not counted).
	Segment StatArray
	// Active counts allocated blocks and freed blocks still awaiting stream events.
	Active StatArray
	// InactiveSplit counts free blocks inside split segments (not of expandable
	// segments): cached memory empty_cache cannot release.
	InactiveSplit StatArray
	// AllocatedBytes is the rounded size of live allocations.
	AllocatedBytes StatArray
	// ReservedBytes is the memory held from the device: segments and mapped pages.
	ReservedBytes StatArray
	// ActiveBytes is the size of active blocks.
	ActiveBytes StatArray
	// InactiveSplitBytes is the size of InactiveSplit blocks.
	InactiveSplitBytes StatArray
	// RequestedBytes is the unrounded size asked for by the active blocks' callers.
	RequestedBytes StatArray

	// NumAllocRetries counts last-resort retries after releasing the whole cache.
	NumAllocRetries int64
	// NumOOMs counts allocations that failed with an OOMError.
	NumOOMs int64
	// NumSyncAllStreams counts waits on every outstanding stream event.
	NumSyncAllStreams int64
	// NumDeviceAlloc counts device Malloc calls and expandable-segment map steps.
	NumDeviceAlloc int64
	// NumDeviceFree counts device Free calls and expandable-segment unmap steps.
	NumDeviceFree int64
	// MaxSplitSize is the configured MaxSplitSize, −1 when unlimited.
	MaxSplitSize int64
	// OversizeAllocations counts live allocations of MaxSplitSize or more.
	OversizeAllocations Stat
	// OversizeSegments counts segments of MaxSplitSize or more.
	OversizeSegments Stat
}

func (a *StatArray) resetPeak() {
	for i := range a {
		a[i].Peak = a[i].Current
	}
}

func (a *StatArray) resetAccumulated() {
	for i := range a {
		a[i].Allocated, a[i].Freed = 0, 0
	}
}

// arrays lists the StatArrays with their PyTorch names, in memory_stats() order.
func (s *Stats) arrays() []struct {
	name string
	a    *StatArray
} {
	return []struct {
		name string
		a    *StatArray
	}{
		{"active", &s.Active},
		{"active_bytes", &s.ActiveBytes},
		{"allocated_bytes", &s.AllocatedBytes},
		{"allocation", &s.Allocation},
		{"inactive_split", &s.InactiveSplit},
		{"inactive_split_bytes", &s.InactiveSplitBytes},
		{"requested_bytes", &s.RequestedBytes},
		{"reserved_bytes", &s.ReservedBytes},
		{"segment", &s.Segment},
	}
}

// resetPeak is reset_peak_memory_stats: every peak becomes the current value.
func (s *Stats) resetPeak() {
	for _, e := range s.arrays() {
		e.a.resetPeak()
	}
	s.OversizeAllocations.Peak = s.OversizeAllocations.Current
	s.OversizeSegments.Peak = s.OversizeSegments.Current
}

// resetAccumulated is reset_accumulated_memory_stats: the allocated/freed totals and
// the five counters go to zero.
func (s *Stats) resetAccumulated() {
	for _, e := range s.arrays() {
		e.a.resetAccumulated()
	}
	s.OversizeAllocations.Allocated, s.OversizeAllocations.Freed = 0, 0
	s.OversizeSegments.Allocated, s.OversizeSegments.Freed = 0, 0
	s.NumAllocRetries = 0
	s.NumOOMs = 0
	s.NumSyncAllStreams = 0
	s.NumDeviceAlloc = 0
	s.NumDeviceFree = 0
}

var poolNames = [3]string{"all", "small_pool", "large_pool"}

// Get returns the statistic a memory_stats() key names (see Map), without building the
// whole map; ok is false for an unknown key.
func (s *Stats) Get(key string) (v int64, ok bool) {
	switch key {
	case "num_alloc_retries":
		return s.NumAllocRetries, true
	case "num_ooms":
		return s.NumOOMs, true
	case "num_sync_all_streams":
		return s.NumSyncAllStreams, true
	case "num_device_alloc":
		return s.NumDeviceAlloc, true
	case "num_device_free":
		return s.NumDeviceFree, true
	case "max_split_size":
		return s.MaxSplitSize, true
	}
	name, rest, _ := strings.Cut(key, ".")
	var st *Stat
	switch name {
	case "oversize_allocations":
		st = &s.OversizeAllocations
	case "oversize_segments":
		st = &s.OversizeSegments
	default:
		pool, field, _ := strings.Cut(rest, ".")
		i := slices.Index(poolNames[:], pool)
		if i < 0 {
			return 0, false
		}
		for _, e := range s.arrays() {
			if e.name == name {
				st = &e.a[i]
			}
		}
		rest = field
	}
	if st == nil {
		return 0, false
	}
	switch rest {
	case "current":
		return st.Current, true
	case "peak":
		return st.Peak, true
	case "allocated":
		return st.Allocated, true
	case "freed":
		return st.Freed, true
	}
	return 0, false
}

func putStat(m map[string]int64, prefix string, s Stat) {
	m[prefix+".current"] = s.Current
	m[prefix+".peak"] = s.Peak
	m[prefix+".allocated"] = s.Allocated
	m[prefix+".freed"] = s.Freed
}

// Map returns the statistics flattened with PyTorch 2.11's memory_stats() keys, e.g.
// "allocated_bytes.all.current", "num_ooms", "oversize_segments.peak".
func (s *Stats) Map() map[string]int64 {
	m := make(map[string]int64, 9*12+6+8)
	for _, e := range s.arrays() {
		for i, pool := range poolNames {
			putStat(m, e.name+"."+pool, e.a[i])
		}
	}
	m["num_alloc_retries"] = s.NumAllocRetries
	m["num_ooms"] = s.NumOOMs
	m["num_sync_all_streams"] = s.NumSyncAllStreams
	m["num_device_alloc"] = s.NumDeviceAlloc
	m["num_device_free"] = s.NumDeviceFree
	m["max_split_size"] = s.MaxSplitSize
	putStat(m, "oversize_allocations", s.OversizeAllocations)
	putStat(m, "oversize_segments", s.OversizeSegments)
	return m
}
