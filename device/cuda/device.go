package cuda

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/internal/hostmem"
)

// Properties describes a GPU as the driver reports it.
type Properties struct {
	Name        string
	Ordinal     int
	TotalMemory int64
	// ComputeMajor and ComputeMinor are the compute capability (9.0 on the H200).
	ComputeMajor, ComputeMinor int
	Multiprocessors            int
	MaxThreadsPerBlock         int
	MaxThreadsPerSM            int
	MaxSharedMemoryPerBlock    int
	WarpSize                   int
	L2CacheSize                int
	// PCI location: domain:bus:device.
	PCIDomain, PCIBus, PCIDevice int
	UnifiedAddressing            bool
	// VirtualMemory tells whether the VMM API (cuMemCreate/cuMemMap) works on this GPU,
	// which the allocator's expandable segments need.
	VirtualMemory bool
}

// Usage counts what a Device has handed out and not yet taken back.
type Usage struct {
	Mallocs       int   // live Malloc allocations
	MallocBytes   int64 // their bytes
	Mappings      int   // live Map calls
	MappedBytes   int64 // their bytes
	Reservations  int   // live Reserve ranges
	ReservedBytes int64 // their bytes
	HostAllocs    int   // live HostAlloc allocations
	HostBytes     int64 // their bytes
	// HostRegistrations counts live HostRegister ranges; RegisteredBytes their bytes.
	HostRegistrations int
	RegisteredBytes   int64
}

// Device is one GPU in its primary context. It implements device.Device,
// device.VirtualMemory, device.PinnedHost and device.HostRegisterer.
//
// Device pointers given to its methods must come from this Device (Malloc, or Map inside
// a Reserve range): copies and memsets are checked against its address table before the
// driver sees them, so a range past the end of an allocation is an error, never a stray
// DMA; streams and events are checked against the live ones for the same reason (the
// driver dereferences their handles). Using a handle while another goroutine destroys or
// frees it is the caller's race.
type Device struct {
	// Immutable after Open.
	drv *driver
	dev int32   // CUdevice
	ctx uintptr // CUcontext: the primary context, retained until Close
	// ctxArgs is []uintptr{ctx}, built once: passed to the variadic syscallN as is, it
	// spares every call a heap-allocated argument slice.
	ctxArgs []uintptr
	name    string
	props   Properties
	// allocProp and access describe VMM allocations on this GPU (cuMemCreate,
	// cuMemSetAccess); granularity is cuMemGetAllocationGranularity for allocProp, or 0
	// when props.VirtualMemory is false.
	allocProp   memAllocationProp
	access      memAccessDesc
	granularity int64

	// params recycles kernel parameter blocks across launches (see Launch).
	params sync.Pool

	// stage holds the pinned buffers large copies from pageable memory go through (its
	// own lock; see stager).
	stage stager

	// table holds the live device ranges: Malloc allocations, Reserve ranges and the
	// pieces mapped in them. It has its own lock.
	table hostmem.Table

	// vmMu serializes the check-driver-record sequences of Reserve, Unreserve, Map and
	// Unmap. Taken before mu.
	vmMu sync.Mutex

	mu sync.Mutex
	// Guarded by mu.
	usage   Usage
	handles map[device.Ptr]mapping // Map: the physical allocation, by address
	host    map[uintptr]int64      // HostAlloc: size, by address
	closed  bool
	// registered is the HostRegister ranges: size, by address.
	registered map[uintptr]int64

	hmu sync.RWMutex
	// Guarded by hmu: the live streams (besides the default one) and events.
	streams map[device.Stream]struct{}
	events  map[device.Event]struct{}
	graphs  map[device.Graph]struct{}
}

var (
	_ device.Device        = (*Device)(nil)
	_ device.VirtualMemory = (*Device)(nil)
	_ device.PinnedHost    = (*Device)(nil)
	_ device.GraphCapturer = (*Device)(nil)
)

// Open makes GPU ordinal usable: it loads the driver on first use and retains the GPU's
// primary context. A machine without the driver gives an error wrapping ErrNoDriver, one
// without that GPU an error wrapping ErrNoDevice. Each Open needs its own Close.
func Open(ordinal int) (*Device, error) {
	drv, err := load()
	if err != nil {
		return nil, err
	}
	n, err := Count()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: %w cuda:%d: the driver sees %d GPU(s)", ErrNoDevice, ordinal, n)
	}
	d := &Device{
		drv:        drv,
		name:       fmt.Sprintf("cuda:%d", ordinal),
		handles:    make(map[device.Ptr]mapping),
		host:       make(map[uintptr]int64),
		registered: make(map[uintptr]int64),
		streams:    make(map[device.Stream]struct{}),
		events:     make(map[device.Event]struct{}),
		graphs:     make(map[device.Graph]struct{}),
	}
	d.params.New = newLaunchParams
	if r := syscallN(drv.cuDeviceGet, uintptr(unsafe.Pointer(&d.dev)), uintptr(ordinal)); r != success {
		return nil, drv.errorf(r, "cuDeviceGet(%d)", ordinal)
	}
	if d.props, err = d.queryProperties(ordinal); err != nil {
		return nil, err
	}
	if r := syscallN(drv.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&d.ctx)), uintptr(d.dev)); r != success {
		return nil, drv.errorf(r, "cuDevicePrimaryCtxRetain(%s)", d.name)
	}
	d.ctxArgs = []uintptr{d.ctx}
	if err := d.initVirtualMemory(); err != nil {
		syscallN(drv.cuDevicePrimaryCtxRelease, uintptr(d.dev))
		return nil, err
	}
	return d, nil
}

func (d *Device) queryProperties(ordinal int) (Properties, error) {
	p := Properties{Ordinal: ordinal}
	name := make([]byte, 256)
	if r := syscallN(d.drv.cuDeviceGetName, uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)), uintptr(d.dev)); r != success {
		return p, d.drv.errorf(r, "cuDeviceGetName(%s)", d.name)
	}
	p.Name = cString(&name[0])
	var total uintptr
	if r := syscallN(d.drv.cuDeviceTotalMem, uintptr(unsafe.Pointer(&total)), uintptr(d.dev)); r != success {
		return p, d.drv.errorf(r, "cuDeviceTotalMem(%s)", d.name)
	}
	p.TotalMemory = int64(total)
	var unified, vmm int
	for _, a := range []struct {
		attr int
		dst  *int
	}{
		{attrComputeMajor, &p.ComputeMajor},
		{attrComputeMinor, &p.ComputeMinor},
		{attrMultiprocessors, &p.Multiprocessors},
		{attrMaxThreadsPerBlock, &p.MaxThreadsPerBlock},
		{attrMaxThreadsPerSM, &p.MaxThreadsPerSM},
		{attrMaxSharedPerBlock, &p.MaxSharedMemoryPerBlock},
		{attrWarpSize, &p.WarpSize},
		{attrL2CacheSize, &p.L2CacheSize},
		{attrPCIDomainID, &p.PCIDomain},
		{attrPCIBusID, &p.PCIBus},
		{attrPCIDeviceID, &p.PCIDevice},
		{attrUnifiedAddressing, &unified},
		{attrVirtualMemory, &vmm},
	} {
		var v int32
		if r := syscallN(d.drv.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a.attr), uintptr(d.dev)); r != success {
			return p, d.drv.errorf(r, "cuDeviceGetAttribute(%d, %s)", a.attr, d.name)
		}
		*a.dst = int(v)
	}
	p.UnifiedAddressing, p.VirtualMemory = unified != 0, vmm != 0
	return p, nil
}

// Close releases the primary context. It refuses, keeping everything, while memory this
// Device handed out is still live: that memory would vanish with the context.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("cuda: %s: Close called twice", d.name)
	}
	if u := d.usage; u != (Usage{}) {
		return fmt.Errorf("cuda: %s: Close with memory still live (%+v); free it first", d.name, u)
	}
	d.hmu.RLock()
	graphs := len(d.graphs)
	d.hmu.RUnlock()
	if graphs > 0 {
		return fmt.Errorf("cuda: %s: Close with %d graph(s) still live; destroy them first (DestroyGraph, or Release the tensor.Graph)", d.name, graphs)
	}
	d.stage.mu.Lock()
	err := d.freeStaging()
	d.stage.mu.Unlock()
	if err != nil {
		return err
	}
	if r := syscallN(d.drv.cuDevicePrimaryCtxRelease, uintptr(d.dev)); r != success {
		return d.drv.errorf(r, "cuDevicePrimaryCtxRelease(%s)", d.name)
	}
	d.closed = true
	return nil
}

// Name returns "cuda:N".
func (d *Device) Name() string { return d.name }

// Kind returns device.CUDA.
func (d *Device) Kind() device.Kind { return device.CUDA }

// Residency is device.Remote: only the GPU's copies and kernels reach its memory.
func (d *Device) Residency() device.Residency { return device.Remote }

// Properties returns what the driver reported about the GPU at Open.
func (d *Device) Properties() Properties { return d.props }

// Usage reports what this Device has handed out and not yet taken back.
func (d *Device) Usage() Usage {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.usage
}

// count adds n allocations of bytes to one pair of Usage counters.
func (d *Device) count(counter *int, bytes *int64, n int, size int64) {
	d.mu.Lock()
	*counter += n
	*bytes += int64(n) * size
	d.mu.Unlock()
}

// call makes the primary context current on this OS thread and calls fn.
//
// The driver keeps the current context per OS thread, and a goroutine may move to
// another thread between any two calls (seen as CUDA_ERROR_INVALID_CONTEXT), so the
// goroutine is locked to its thread for the pair. Setting the context on every call was
// chosen over a per-thread cache of "context already current here". Measured on the H200
// machine (BenchmarkContextSwitch, BenchmarkCall, 2026-11-30, three runs), the
// candidates cost the same within noise: LockOSThread + cuCtxSetCurrent +
// UnlockOSThread 105-173 ns, the cache's lookup alone (a gettid system call and a
// sync.Map load, under LockOSThread) 120-183 ns, cuCtxGetCurrent 119-194 ns. Neither
// wins consistently, and a cache goes stale whenever other code on the thread (another
// Device, a library) changes the current context; setting it never does. A whole
// Device.call costs 210-463 ns against 104-172 ns for the bare foreign call
// (BenchmarkSyscall).
//
//go:uintptrescapes
func (d *Device) call(fn uintptr, args ...uintptr) result {
	r := d.enter()
	if r == success {
		r = syscallN(fn, args...)
	}
	d.exit()
	return r
}

// callInts is call for the hot paths (a launch, a memset): it copies args into a pooled
// block on the heap, so that the foreign call allocates nothing, where call's variadic
// arguments escape on every call (go:uintptrescapes). Since nothing here keeps a
// pointer alive, args are integers, or addresses of memory the caller keeps alive
// until callInts returns (a pooled launchParams it still holds).
func (d *Device) callInts(fn uintptr, args ...uintptr) result {
	p := d.params.Get().(*launchParams)
	n := copy(p.call[:], args)
	r := d.enter()
	if r == success {
		r = syscallArgs(fn, p.call[:n])
	}
	d.exit()
	d.params.Put(p)
	return r
}

// enter locks the goroutine to its thread and makes the primary context current, for
// a sequence of driver calls made with syscallN; exit must follow, whatever enter
// returned.
func (d *Device) enter() result {
	runtime.LockOSThread()
	return syscallN(d.drv.cuCtxSetCurrent, d.ctxArgs...)
}

func (d *Device) exit() { runtime.UnlockOSThread() }

// Malloc returns size bytes of device memory from cuMemAlloc.
func (d *Device) Malloc(size int64) (device.Ptr, error) {
	if size <= 0 {
		return 0, fmt.Errorf("cuda: %s: Malloc(%d): size must be positive", d.name, size)
	}
	var p device.Ptr
	if r := d.call(d.drv.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(size)); r != success {
		return 0, d.drv.errorf(r, "cuMemAlloc(%d bytes)", size)
	}
	if err := d.table.AddAllocation(p, size, nil); err != nil {
		d.call(d.drv.cuMemFree, uintptr(p))
		return 0, fmt.Errorf("cuda: %s: cuMemAlloc(%d bytes) returned %#x: %w", d.name, size, uintptr(p), err)
	}
	d.count(&d.usage.Mallocs, &d.usage.MallocBytes, 1, size)
	return p, nil
}

// Free returns memory from Malloc with cuMemFree.
func (d *Device) Free(p device.Ptr) error {
	size, _, err := d.table.RemoveAllocation(p)
	if err != nil {
		return fmt.Errorf("cuda: %s: Free: %w", d.name, err)
	}
	if r := d.call(d.drv.cuMemFree, uintptr(p)); r != success {
		// The driver still holds the memory: keep it live so that a retry can free it.
		if err := d.table.AddAllocation(p, size, nil); err != nil {
			return fmt.Errorf("cuda: %s: Free(%#x): %w, then %w", d.name, uintptr(p), d.drv.errorf(r, "cuMemFree"), err)
		}
		return d.drv.errorf(r, "cuMemFree(%#x, %d bytes)", uintptr(p), size)
	}
	d.count(&d.usage.Mallocs, &d.usage.MallocBytes, -1, size)
	return nil
}

// MemInfo reports cuMemGetInfo: free and total bytes of the GPU, all processes counted.
func (d *Device) MemInfo() (free, total int64, err error) {
	var f, t uintptr
	if r := d.call(d.drv.cuMemGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t))); r != success {
		return 0, 0, d.drv.errorf(r, "cuMemGetInfo(%s)", d.name)
	}
	return int64(f), int64(t), nil
}

// Synchronize waits for all work in the context (cuCtxSynchronize).
func (d *Device) Synchronize() error {
	if r := d.call(d.drv.cuCtxSynchronize); r != success {
		return d.drv.errorf(r, "cuCtxSynchronize(%s)", d.name)
	}
	return nil
}
