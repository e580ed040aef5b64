package demo

import (
	"fmt"

	"github.com/subletml/sublet/alloc"
)

// Memory is the allocator's figures at one moment, in bytes and counts (PyTorch's
// memory_stats names in the comments).
type Memory struct {
	// Allocated is the rounded size of live blocks (memory_allocated); Requested what
	// their callers asked for, the bytes tensors hold; Reserved what the allocator holds
	// from the device (memory_reserved).
	Allocated, Requested, Reserved int64
	// PeakAllocated, PeakRequested and PeakReserved are the highest values since the
	// last ResetPeakStats (max_memory_allocated, max_memory_reserved).
	PeakAllocated, PeakRequested, PeakReserved int64
	// InactiveSplit is cached memory inside segments that also hold live blocks: what
	// EmptyCache cannot give back (fragmentation).
	InactiveSplit int64
	// Allocations counts the blocks handed out since the last ResetAccumulatedStats,
	// AllocatedTotal their bytes.
	Allocations, AllocatedTotal int64
	// DeviceAllocs and DeviceFrees count the device's own Malloc and Free calls (and
	// expandable segments' map and unmap steps) since the last ResetAccumulatedStats.
	DeviceAllocs, DeviceFrees int64
	// Retries counts allocations that released the whole cache and tried again; OOMs
	// those that failed even so.
	Retries, OOMs int64
}

// Read returns a's figures now.
func Read(a *alloc.Allocator) Memory {
	st := a.Stats()
	all := alloc.StatAll
	return Memory{
		Allocated:      st.AllocatedBytes[all].Current,
		Requested:      st.RequestedBytes[all].Current,
		Reserved:       st.ReservedBytes[all].Current,
		PeakAllocated:  st.AllocatedBytes[all].Peak,
		PeakRequested:  st.RequestedBytes[all].Peak,
		PeakReserved:   st.ReservedBytes[all].Peak,
		InactiveSplit:  st.InactiveSplitBytes[all].Current,
		Allocations:    st.Allocation[all].Allocated,
		AllocatedTotal: st.AllocatedBytes[all].Allocated,
		DeviceAllocs:   st.NumDeviceAlloc,
		DeviceFrees:    st.NumDeviceFree,
		Retries:        st.NumAllocRetries,
		OOMs:           st.NumOOMs,
	}
}

// Drain empties a's cache and returns an error unless a then holds nothing, neither
// allocated nor reserved: the end of every example, once it released what it made.
func Drain(a *alloc.Allocator) error {
	if err := a.EmptyCache(); err != nil {
		return err
	}
	if m := Read(a); m.Allocated != 0 || m.Reserved != 0 {
		return fmt.Errorf("after releasing everything and emptying the cache, the allocator on %s holds %d bytes allocated and %d reserved: something leaked",
			a.Device().Name(), m.Allocated, m.Reserved)
	}
	return nil
}
