package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/internal/units"
)

// meter is a user-written device: it wraps another device.Device, counts the calls
// that get and give back memory (what the caching allocator asks of the driver), and
// refuses a Malloc that would take its bytes in use past its budget, with an error
// wrapping device.ErrOutOfMemory, as a driver out of memory does. Every other method is
// the wrapped device's (the embedded interface).
//
// The caching allocator and the tensor package take it as they take any device: the
// allocator calls Malloc and Free on it; tensor computes with the CPU kernels on the
// memory Bytes returns when its Kind is cpu or sim, so meter forwards Bytes
// (device.HostMemory) to the wrapped device.
type meter struct {
	device.Device
	// budget is the most bytes meter lets be in use at once; 0 is none. Set before use.
	budget int64

	// mu guards the fields below it.
	mu sync.Mutex
	// live maps each live allocation to its size.
	live map[device.Ptr]int64
	// inUse is the sum of live; peak its maximum.
	inUse, peak int64
	// mallocs, frees and refused count the calls; refused are the Mallocs over budget.
	mallocs, frees, refused int64
	// sizes counts the successful Mallocs by size.
	sizes map[int64]int
}

var _ device.HostMemory = (*meter)(nil)

func newMeter(d device.Device, budget int64) *meter {
	return &meter{Device: d, budget: budget, live: map[device.Ptr]int64{}, sizes: map[int64]int{}}
}

// Unwrap is the device the meter wraps: tensor ops on the meter's memory run on its
// kernels (a GPU's, when it wraps cuda:0).
func (m *meter) Unwrap() device.Device { return m.Device }

// Name says whose device this is.
func (m *meter) Name() string { return "meter(" + m.Device.Name() + ")" }

// Malloc refuses a request over the budget, else asks the wrapped device.
func (m *meter) Malloc(size int64) (device.Ptr, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.budget > 0 && m.inUse+size > m.budget {
		m.refused++
		return 0, fmt.Errorf("%s: Malloc(%d): %d bytes in use of a budget of %d: %w", m.Name(), size, m.inUse, m.budget, device.ErrOutOfMemory)
	}
	p, err := m.Device.Malloc(size)
	if err != nil {
		return 0, err
	}
	m.live[p] = size
	m.inUse += size
	m.peak = max(m.peak, m.inUse)
	m.mallocs++
	m.sizes[size]++
	return p, nil
}

// Free gives p back to the wrapped device.
func (m *meter) Free(p device.Ptr) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	size, ok := m.live[p]
	if !ok {
		return fmt.Errorf("%s: Free(%#x): not an allocation of this device", m.Name(), uintptr(p))
	}
	if err := m.Device.Free(p); err != nil {
		return err
	}
	delete(m.live, p)
	m.inUse -= size
	m.frees++
	return nil
}

// MemInfo reports the budget as the total when there is one (the allocator's OOM report
// and memory fraction read it), and what is left of it as free.
func (m *meter) MemInfo() (free, total int64, err error) {
	free, total, err = m.Device.MemInfo()
	if err != nil || m.budget == 0 {
		return free, total, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return min(free, m.budget-m.inUse), m.budget, nil
}

// Bytes is the wrapped device's, when it has host-addressable memory.
func (m *meter) Bytes(p device.Ptr, n int64) ([]byte, bool) {
	if hm, ok := m.Device.(device.HostMemory); ok {
		return hm.Bytes(p, n)
	}
	return nil, false
}

// counts is a snapshot of the meter's counters.
type counts struct {
	mallocs, frees, refused, inUse, peak int64
	live                                 int
}

func (m *meter) counts() counts {
	m.mu.Lock()
	defer m.mu.Unlock()
	return counts{m.mallocs, m.frees, m.refused, m.inUse, m.peak, len(m.live)}
}

// histogram lists the Malloc sizes, largest first, with their counts.
func (m *meter) histogram() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	sizes := make([]int64, 0, len(m.sizes))
	for s := range m.sizes {
		sizes = append(sizes, s)
	}
	slices.Sort(sizes)
	slices.Reverse(sizes)
	parts := make([]string, len(sizes))
	for i, s := range sizes {
		parts[i] = fmt.Sprintf("%s ×%d", units.Bytes(s), m.sizes[s])
	}
	return strings.Join(parts, ", ")
}
