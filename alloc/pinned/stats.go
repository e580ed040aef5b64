package pinned

import (
	"sync/atomic"

	"github.com/subletml/sublet/alloc"
)

// Stats is the allocator's statistics under the names of PyTorch's
// torch.cuda.host_memory_stats(). Host allocation and free times are not kept.
type Stats struct {
	// Allocations counts blocks held from the system, in use, parked or cached, and the
	// reserve segment as one more ("allocations.*"); AllocatedBytes their bytes
	// ("allocated_bytes.*"). Blocks carved from the segment count only as active.
	Allocations, AllocatedBytes alloc.Stat
	// ActiveRequests counts blocks handed out by Alloc and not yet given to Free
	// ("active_requests.*"); ActiveBytes their bytes, rounded to the block
	// ("active_bytes.*").
	ActiveRequests, ActiveBytes alloc.Stat
	// NumHostAlloc and NumHostFree count the blocks (and the reserve segment) taken
	// from and returned to the system ("num_host_alloc", "num_host_free").
	NumHostAlloc, NumHostFree int64
}

// Stats returns the statistics. Each counter is exact; counters changing during the call
// may be read at slightly different moments.
func (a *Allocator) Stats() Stats {
	return Stats{
		Allocations:    a.stats.allocations.load(),
		AllocatedBytes: a.stats.allocatedBytes.load(),
		ActiveRequests: a.stats.activeRequests.load(),
		ActiveBytes:    a.stats.activeBytes.load(),
		NumHostAlloc:   a.stats.numHostAlloc.Load(),
		NumHostFree:    a.stats.numHostFree.Load(),
	}
}

// StatsMap returns the statistics under host_memory_stats() keys: "allocations.current",
// "allocations.peak", "allocations.allocated", "allocations.freed", the same for
// allocated_bytes, active_requests and active_bytes, then num_host_alloc and
// num_host_free.
func (a *Allocator) StatsMap() map[string]int64 {
	st := a.Stats()
	m := map[string]int64{"num_host_alloc": st.NumHostAlloc, "num_host_free": st.NumHostFree}
	for name, s := range map[string]alloc.Stat{
		"allocations":     st.Allocations,
		"allocated_bytes": st.AllocatedBytes,
		"active_requests": st.ActiveRequests,
		"active_bytes":    st.ActiveBytes,
	} {
		m[name+".current"] = s.Current
		m[name+".peak"] = s.Peak
		m[name+".allocated"] = s.Allocated
		m[name+".freed"] = s.Freed
	}
	return m
}

// ResetPeakStats sets every peak to the current value.
func (a *Allocator) ResetPeakStats() {
	for _, s := range []*stat{&a.stats.allocations, &a.stats.allocatedBytes, &a.stats.activeRequests, &a.stats.activeBytes} {
		s.peak.Store(s.current.Load())
	}
}

// counters are the allocator's statistics, updated without locks.
type counters struct {
	allocations, allocatedBytes, activeRequests, activeBytes stat
	numHostAlloc, numHostFree                                atomic.Int64
}

// stat is an alloc.Stat kept with atomics; the peak is raised with compare-and-swap, so
// it is exact.
type stat struct {
	current, peak, allocated, freed atomic.Int64
}

func (s *stat) increase(n int64) {
	s.allocated.Add(n)
	cur := s.current.Add(n)
	for {
		p := s.peak.Load()
		if cur <= p || s.peak.CompareAndSwap(p, cur) {
			return
		}
	}
}

func (s *stat) decrease(n int64) {
	s.freed.Add(n)
	s.current.Add(-n)
}

func (s *stat) load() alloc.Stat {
	return alloc.Stat{Current: s.current.Load(), Peak: s.peak.Load(), Allocated: s.allocated.Load(), Freed: s.freed.Load()}
}
