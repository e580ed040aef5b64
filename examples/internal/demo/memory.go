package demo

import (
	"fmt"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/internal/units"
	"github.com/subletml/sublet/tensor"
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
	// Backend is the part of Requested that the device's kernels keep for themselves
	// between ops (tensor.BackendHeld: the cuBLAS workspace on a GPU, 0 elsewhere):
	// memory, but no tensor's. Tensors is Requested less it.
	Backend int64
}

// Tensors is the bytes live tensors hold: Requested less what the kernels keep.
func (m Memory) Tensors() int64 { return m.Requested - m.Backend }

// BackendLine is the line an example prints about what the kernels keep, or "" when
// they keep nothing (every device but a GPU).
func (m Memory) BackendLine() string {
	if m.Backend == 0 {
		return ""
	}
	return fmt.Sprintf("the kernels keep %s of the allocator's memory for themselves (the cuBLAS workspace): not tensors, so left out of the figures below\n", units.Bytes(m.Backend))
}

// PeakTensors is the most bytes tensors held since the last ResetPeakStats:
// PeakRequested less what the kernels keep now. The kernels take their memory at the
// first product and keep it, before any peak an example measures, so the peak counted
// it once.
func (m Memory) PeakTensors() int64 { return m.PeakRequested - m.Backend }

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
		Backend:        tensor.BackendHeld(a.Device()),
	}
}

// Drain gives back what the device's kernels keep (tensor.ReleaseBackend), empties a's
// cache and returns an error unless a then holds nothing, neither allocated nor
// reserved: the end of every example, once it released what it made.
func Drain(a *alloc.Allocator) error {
	if err := tensor.ReleaseBackend(a.Device()); err != nil {
		return err
	}
	if err := a.EmptyCache(); err != nil {
		return err
	}
	if m := Read(a); m.Allocated != 0 || m.Reserved != 0 {
		return fmt.Errorf("after releasing everything and emptying the cache, the allocator on %s holds %d bytes allocated and %d reserved: something leaked",
			a.Device().Name(), m.Allocated, m.Reserved)
	}
	return nil
}
