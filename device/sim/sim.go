// Package sim is a simulated accelerator for tests, CI and what-if studies: a fixed
// capacity, a cost model for raw allocations charged to a virtual clock (or really
// slept), fault injection, controllable event completion, driver-like address placement
// (or a recorded driver's exact addresses), and an optional backing store. Without one it
// is a "meta" device: addresses and bytes are accounted, copies and memsets only check
// their ranges, so a 140 GiB trace replays on a laptop.
//
// # Use
//
//	meta, err := sim.New(sim.Options{})                                   // an H200's memory, no data
//	backed, err := sim.New(sim.Options{Capacity: 8 << 30, Backing: true}) // 8 GiB that keeps data
//
// Tensors on a device without data allocate exactly what they would on a GPU and
// compute nothing (reading a value panics with tensor.ErrNoData): memory at named
// moments of a full-size model is checked in milliseconds. Options.Occupied, Faults
// and Segments reproduce a crowded GPU, failures and a recorded driver.
//
// Invariants:
//   - Bytes in use (Stats().InUse) is the sum of the sizes of live Malloc allocations
//     and mapped pieces; in use + occupied (Options.Occupied) never exceeds the
//     capacity. MemInfo reports (capacity - occupied - in use, capacity).
//   - Malloc addresses and reserved ranges come from disjoint regions of the simulated
//     address space; no two live ranges overlap.
//   - With a backing store, every live allocation and mapped piece is host memory from
//     internal/hostmem, returned to the OS by Free and Unmap.
//   - Every method is safe for concurrent use. Lock order: mu, then the table's lock;
//     streamMu is never held with either.
package sim

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/internal/hostmem"
)

// DefaultCapacity is the total memory the H200's driver reports: 150109880320 bytes.
const DefaultCapacity int64 = 150109880320

// Granularity is the unit of VirtualMemory's Map and Unmap, as on the H200.
const Granularity int64 = 2 << 20

// Options configures a simulated device. The zero Options is a meta H200: 150109880320
// bytes, no backing store, the H200 cost model on the virtual clock, the top-down
// placement, no faults.
type Options struct {
	// Capacity is the device's total memory in bytes; 0 means DefaultCapacity.
	Capacity int64
	// Occupied is the part of Capacity held by others from the start (the CUDA context,
	// other processes): never available, counted as used by MemInfo. On the H200 a
	// fresh context leaves total - free_at_start of torch_replay.py occupied.
	Occupied int64
	// Backing keeps real data in host memory: copies move bytes and Bytes works.
	Backing bool
	// Cost prices Malloc, Free, Map and Unmap; nil means H200Cost(), &CostModel{} is free.
	Cost *CostModel
	// Sleep really sleeps each call's cost instead of only adding it to Elapsed.
	Sleep bool
	// Faults injects allocation failures (see SetFaults).
	Faults Faults
	// Segments, when not nil, replaces the top-down placement with a recorded one: the
	// Nth Malloc gets Segments[N-1].Addr and must ask for Segments[N-1].Size bytes, or it
	// fails naming the index; so does a Malloc beyond the recording. A failed Malloc uses
	// up no segment. Reservations still come from their own region. See LoadSegments.
	Segments []Segment
}

// Stats are the device's counters.
type Stats struct {
	// InUse is the bytes of live allocations and mapped pieces; Peak its maximum.
	InUse, Peak int64
	// Successful calls.
	Mallocs, Frees, Maps, Unmaps, Remaps, Reserves, Unreserves int64
	// Faults counts injected failures; OOMs failures for lack of capacity.
	Faults, OOMs int64
	// Synchronizations and event queries.
	StreamSyncs, DeviceSyncs, EventSyncs, EventQueries int64
}

// Device is a simulated accelerator. It implements device.Device, device.VirtualMemory
// and device.HostMemory.
type Device struct {
	// Set by New, never changed.
	capacity int64
	occupied int64
	backing  bool
	cost     CostModel
	sleep    bool

	// table records live ranges; it has its own lock, taken after mu.
	table hostmem.Table
	// copier implements the copies over table; set by New.
	copier hostmem.Copier

	// mu guards the fields below it up to streamMu.
	mu       sync.Mutex
	place    placer
	reserved spans
	faults   faultState
	elapsed  time.Duration
	// stats holds the memory counters; its synchronization and query counters stay
	// zero (they are syncs').
	stats Stats

	// streamMu guards the fields below it.
	streamMu   sync.Mutex
	streams    map[device.Stream]*stream
	events     map[device.Event]*event
	lastStream device.Stream
	lastEvent  device.Event
	// syncs holds the synchronization and query counters; its other fields stay zero.
	syncs Stats
}

var (
	_ device.Device        = (*Device)(nil)
	_ device.VirtualMemory = (*Device)(nil)
	_ device.HostMemory    = (*Device)(nil)
)

// New creates a simulated device. It fails where pointers have 32 bits: the simulated
// addresses lie far above 4 GiB, as a GPU's do.
func New(o Options) (*Device, error) {
	// The simulated address space lies near a GPU's, far above 4 GiB (placement.go).
	if uint64(^device.Ptr(0)) < mallocTop {
		return nil, fmt.Errorf("sim.New: the simulated device needs 64-bit pointers, and GOARCH=%s has %d-bit ones", runtime.GOARCH, 8*unsafe.Sizeof(device.Ptr(0)))
	}
	if o.Capacity < 0 {
		return nil, fmt.Errorf("sim.New: Capacity is %d; want 0 (DefaultCapacity) or a positive byte count", o.Capacity)
	}
	if o.Capacity == 0 {
		o.Capacity = DefaultCapacity
	}
	if o.Occupied < 0 || o.Occupied > o.Capacity {
		return nil, fmt.Errorf("sim.New: Occupied is %d; want 0 up to the capacity %d", o.Occupied, o.Capacity)
	}
	if err := o.Faults.validate(); err != nil {
		return nil, err
	}
	cost := H200Cost()
	if o.Cost != nil {
		cost = *o.Cost
	}
	if cost.PairBase < 0 || cost.PerGiB < 0 || cost.Knee < 0 {
		return nil, fmt.Errorf("sim.New: cost model %+v has a negative field", cost)
	}
	d := &Device{
		capacity: o.Capacity,
		occupied: o.Occupied,
		backing:  o.Backing,
		cost:     cost,
		sleep:    o.Sleep,
		reserved: spans{free: []span{{reserveBase, reserveTop}}},
		faults:   newFaultState(o.Faults),
		streams:  map[device.Stream]*stream{0: {}},
		events:   map[device.Event]*event{},
	}
	if o.Segments != nil {
		if err := checkSegments(o.Segments); err != nil {
			return nil, fmt.Errorf("sim.New: Options.Segments: %w", err)
		}
		d.place = &recorded{segs: o.Segments}
	} else {
		d.place = newTopDown(o.Capacity)
	}
	d.copier = hostmem.Copier{Table: &d.table, Name: "sim", CheckStream: d.checkStream}
	return d, nil
}

// Name is "sim".
func (d *Device) Name() string { return "sim" }

// Kind is device.Sim.
func (d *Device) Kind() device.Kind { return device.Sim }

// Capacity is the device's total memory in bytes.
func (d *Device) Capacity() int64 { return d.capacity }

// SetFaults replaces the fault injection; the count of raw allocations restarts, and the
// generator is seeded again.
func (d *Device) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults = newFaultState(f)
	return nil
}

// Elapsed is the simulated driver time charged so far (slept too when Options.Sleep).
func (d *Device) Elapsed() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.elapsed
}

// Stats returns the counters.
func (d *Device) Stats() Stats {
	d.mu.Lock()
	s := d.stats
	d.mu.Unlock()
	d.streamMu.Lock()
	defer d.streamMu.Unlock()
	s.StreamSyncs, s.DeviceSyncs = d.syncs.StreamSyncs, d.syncs.DeviceSyncs
	s.EventSyncs, s.EventQueries = d.syncs.EventSyncs, d.syncs.EventQueries
	return s
}

// MemInfo reports (capacity - occupied - bytes in use, capacity).
func (d *Device) MemInfo() (free, total int64, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.capacity - d.occupied - d.stats.InUse, d.capacity, nil
}

// charge adds cost to the virtual clock. Caller holds mu; it sleeps after unlocking,
// for the returned duration.
func (d *Device) charge(cost time.Duration) time.Duration {
	d.elapsed += cost
	if d.sleep {
		return cost
	}
	return 0
}

// admit decides whether a raw allocation of size bytes may proceed: not an injected
// fault, and within capacity. On success the bytes are counted in use (the caller takes
// them out again if the allocation fails after all). Caller holds mu.
func (d *Device) admit(op string, size int64) error {
	if fail, call := d.faults.next(); fail {
		d.stats.Faults++
		return fmt.Errorf("sim: %s(%d): injected failure of raw allocation %d: %w", op, size, call, device.ErrOutOfMemory)
	}
	if size > d.capacity-d.occupied-d.stats.InUse {
		d.stats.OOMs++
		return fmt.Errorf("sim: %s(%d): %d bytes in use and %d occupied of %d: %w", op, size, d.stats.InUse, d.occupied, d.capacity, device.ErrOutOfMemory)
	}
	d.stats.InUse += size
	return nil
}

// Malloc places size bytes (see Options.Segments and the top-down policy), backs them
// with host memory when the device has a backing store, and charges half a pair's cost.
func (d *Device) Malloc(size int64) (device.Ptr, error) {
	if size <= 0 {
		return 0, fmt.Errorf("sim: Malloc(%d): size must be positive", size)
	}
	p, sleep, err := d.malloc(size)
	time.Sleep(sleep)
	return p, err
}

func (d *Device) malloc(size int64) (device.Ptr, time.Duration, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.admit("Malloc", size); err != nil {
		return 0, 0, err
	}
	addr, err := d.place.place(size)
	if err != nil {
		d.stats.InUse -= size
		return 0, 0, fmt.Errorf("sim: Malloc(%d): %w", size, err)
	}
	var mem []byte
	if d.backing {
		if mem, err = hostmem.Alloc(size); err != nil {
			d.place.unplace(addr, size)
			d.stats.InUse -= size
			return 0, 0, fmt.Errorf("sim: Malloc(%d): backing store: %w: %w", size, device.ErrOutOfMemory, err)
		}
	}
	p := device.Ptr(addr)
	if err := d.table.AddAllocation(p, size, mem); err != nil {
		d.place.unplace(addr, size)
		d.stats.InUse -= size
		if mem != nil {
			err = errors.Join(err, hostmem.Free(mem))
		}
		return 0, 0, fmt.Errorf("sim: Malloc(%d): %w", size, err)
	}
	d.stats.Mallocs++
	d.stats.Peak = max(d.stats.Peak, d.stats.InUse)
	return p, d.charge(d.cost.acquire(size)), nil
}

// Free gives back an allocation from Malloc, and charges half a pair's cost.
func (d *Device) Free(p device.Ptr) error {
	sleep, err := d.free(p)
	time.Sleep(sleep)
	return err
}

func (d *Device) free(p device.Ptr) (time.Duration, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	size, mem, err := d.table.RemoveAllocation(p)
	if err != nil {
		return 0, fmt.Errorf("sim: Free(%#x): %w", uintptr(p), err)
	}
	d.place.release(uint64(p), size)
	d.stats.InUse -= size
	d.stats.Frees++
	sleep := d.charge(d.cost.release(size))
	if mem != nil {
		if err := hostmem.Free(mem); err != nil {
			return sleep, fmt.Errorf("sim: Free(%#x): backing store: %w", uintptr(p), err)
		}
	}
	return sleep, nil
}
