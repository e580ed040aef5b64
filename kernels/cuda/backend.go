package cuda

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"sync"
	"sync/atomic"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/kernels"
)

// Backend is this package's kernels as a kernels.Backend over one GPU's memory (the
// Ptr of each operand's Mem). Get it with For. It is safe for concurrent use: every
// method may be called from any goroutine, and kernels run in the order they were
// launched on their stream (the first output's Mem.Stream).
type Backend struct {
	// Immutable after For.
	dev *cudadev.Device
	al  *alloc.Allocator // the device's caching allocator: cuBLAS workspaces come from it
	sms int              // multiprocessors: grid sizes of the grid-striding kernels

	mods modules
	blas blasPool
	// blt is cuBLASLt, for products with a bias (MatmulBias); it guards itself.
	blt blasLt

	// tf32 lets F32 products use TF32 tensor cores (SetTF32); off by default.
	tf32 atomic.Bool
	// launches counts the kernels and cuBLAS products launched (Launches).
	launches atomic.Int64

	// rec is set only by this package's tests: see recorder.
	rec *recorder

	// flagMu serializes the launches of kernels that can report an error through the
	// device's ErrorFlag with Check, which reads and clears it: a report made after
	// Check read the flag would otherwise be cleared unseen.
	flagMu sync.Mutex
	// Guarded by flagMu.
	flag   device.Ptr // the flag's device block (raw device memory), 0 until a kernel needs it
	record []byte     // the ErrorFlag record in page-locked host memory; nil: it is in the block
	seq    uint32     // launches that may report since the flag was last cleared
	armed  bool       // some launch may have reported since the last Check

	mu sync.Mutex
	// Guarded by mu.
	faults  []error // device errors (a launch, a module) since the last Check, at most maxFaults
	dropped int     // further faults not kept
	scratch map[device.Stream]*scratch
}

var _ kernels.Backend = (*Backend)(nil)
var _ kernels.Async = (*Backend)(nil)

// maxFaults is how many device errors Check reports in full.
const maxFaults = 8

// registry holds the Backend of each Device For has seen (m, which every op on a GPU
// reads, without a lock); the Mutex serializes making them. A Backend, once in m,
// stays.
var registry struct {
	sync.Mutex
	m sync.Map // *cudadev.Device → *Backend
}

// For returns dev's Backend, creating it on first use: one per Device, as the Device
// has one caching allocator. Nothing is loaded yet; each kernel family loads on first
// use, cuBLAS on the first product.
func For(dev *cudadev.Device) (*Backend, error) {
	if b, ok := registry.m.Load(dev); ok {
		return b.(*Backend), nil
	}
	registry.Lock()
	defer registry.Unlock()
	if b, ok := registry.m.Load(dev); ok { // made while this call waited for the lock
		return b.(*Backend), nil
	}
	al, err := alloc.For(dev)
	if err != nil {
		return nil, fmt.Errorf("kernels/cuda: %s: %w", dev.Name(), err)
	}
	b := &Backend{dev: dev, al: al, sms: max(dev.Properties().Multiprocessors, 1), scratch: make(map[device.Stream]*scratch)}
	b.mods.dev = dev
	p := dev.Properties()
	b.blas.b, b.blas.wsBytes = b, WorkspaceBytes(os.Getenv(WorkspaceEnv), p.ComputeMajor, p.ComputeMinor)
	registry.m.Store(dev, b)
	return b, nil
}

// Name is "cuda".
func (*Backend) Name() string { return "cuda" }

// Device is the GPU the backend computes on.
func (b *Backend) Device() *cudadev.Device { return b.dev }

// SetTF32 lets products of F32 operands run on TF32 tensor cores (10-bit mantissas in
// the multiply, F32 accumulate), PyTorch's torch.backends.cuda.matmul.allow_tf32; off
// by default, as there.
func (b *Backend) SetTF32(on bool) { b.tf32.Store(on) }

// fault keeps a device error to report at the next Check.
func (b *Backend) fault(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.faults) < maxFaults {
		b.faults = append(b.faults, err)
	} else {
		b.dropped++
	}
}

// launch runs kernel k with cfg and args; a failure (the family does not load, the
// driver refuses the launch) is kept for Check, as CUDA keeps its asynchronous faults.
func (b *Backend) launch(k kernel, cfg cudadev.LaunchConfig, args ...cudadev.Arg) {
	b.launches.Add(1)
	if b.rec != nil {
		b.rec.launch(k, cfg, args)
		return
	}
	fn, err := b.mods.function(k)
	if err == nil {
		err = b.dev.Launch(fn, cfg, args...)
	}
	if err != nil {
		b.fault(err)
	}
}

// grid returns the launch shape of a grid-striding kernel over n items on stream s:
// one item per thread, at most 32 blocks per multiprocessor (the stride covers the
// rest); results never depend on it.
func (b *Backend) grid(n int64, s device.Stream) cudadev.LaunchConfig {
	blocks := min((n+block-1)/block, int64(32*b.sms))
	return cudadev.LaunchConfig{Grid: cudadev.Dim3{X: uint32(max(blocks, 1))}, Block: cudadev.Dim3{X: block}, Stream: s}
}

// rowsGrid returns the launch shape of a row kernel: a group of g threads (a warp or
// a whole block) per row, block/g rows per block, a block for every block/g rows.
func rowsGrid(rows int64, g int, s device.Stream) cudadev.LaunchConfig {
	per := int64(block / g)
	return cudadev.LaunchConfig{Grid: cudadev.Dim3{X: uint32(max((rows+per-1)/per, 1))}, Block: cudadev.Dim3{X: block}, Stream: s}
}

// block is the threads per block of every kernel (BLOCK of src/common.cuh).
const block = hdrBlock

// Check implements kernels.Async: it returns the data-dependent error the kernels
// found first since the last Check (an index outside its range, as a
// *kernels.IndexError naming the op; elements outside an op's domain, as a
// *kernels.RangeError with their count) and the device errors kept since (a launch or a
// module that failed), joined. When a kernel that can report ran since, it first waits for the device
// (cuCtxSynchronize); otherwise it returns at once.
func (b *Backend) Check() error {
	var errs []error
	b.flagMu.Lock()
	if b.armed {
		errs = append(errs, b.readFlag())
	}
	b.flagMu.Unlock()
	b.mu.Lock()
	errs = append(errs, b.faults...)
	if b.dropped > 0 {
		errs = append(errs, fmt.Errorf("kernels/cuda: %s: %d more device errors", b.name(), b.dropped))
	}
	b.faults, b.dropped = nil, 0
	b.mu.Unlock()
	return errors.Join(errs...)
}

// Synchronize waits for all work on the device, then reports what Check reports.
func (b *Backend) Synchronize() error {
	if err := b.synchronize(); err != nil {
		return errors.Join(err, b.Check())
	}
	return b.Check()
}

// Held is memory the backend keeps between ops, outside any tensor: what tests and
// memory summaries name apart.
type Held struct {
	What  string // "cuBLAS workspace (stream 0x0)", "kernels/cuda scratch (stream 0x0)", ...
	Bytes int64
	// Allocator says whether the block comes from the device's caching allocator (and
	// so counts in its statistics, as PyTorch's cuBLAS workspaces do) or straight from
	// the driver.
	Allocator bool
	// Host says the block is page-locked host memory (device.PinnedHost's HostAlloc,
	// counted in the device's host usage), not device memory.
	Host bool
}

// Held lists the memory the backend keeps now.
func (b *Backend) Held() []Held {
	var h []Held
	b.flagMu.Lock()
	if b.flag != 0 {
		h = append(h, Held{What: "kernels/cuda error flag", Bytes: flagBytes})
	}
	if b.record != nil {
		h = append(h, Held{What: "kernels/cuda error record", Bytes: int64(len(b.record)), Host: true})
	}
	b.flagMu.Unlock()
	for s, sc := range b.scratches() {
		sc.mu.Lock()
		if sc.ptr != 0 {
			h = append(h, Held{What: fmt.Sprintf("kernels/cuda scratch (stream %#x)", uintptr(s)), Bytes: scratchBytes + ticketBytes})
		}
		sc.mu.Unlock()
	}
	return append(h, b.blas.held()...)
}

// Release gives back the memory the backend keeps (Held): the cuBLAS workspaces go
// back to the caching allocator (PyTorch's torch._C._cuda_clearCublasWorkspaces), the
// scratch, the error flag and its host record to the driver, after the device has
// finished its work.
// The next op that needs them takes them again. The device's Close refuses while the
// backend holds memory.
func (b *Backend) Release() error {
	err := b.Synchronize()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, b.blas.release()...)
	if lt := b.lt(); lt != nil {
		errs = append(errs, lt.release(b)...)
	}
	for _, sc := range b.scratches() {
		sc.mu.Lock()
		if sc.ptr != 0 {
			if err := b.free(sc.ptr); err != nil {
				errs = append(errs, err)
			}
			sc.ptr = 0
		}
		sc.mu.Unlock()
	}
	b.flagMu.Lock()
	if err := b.freeFlag(); err != nil {
		errs = append(errs, err)
	}
	b.flagMu.Unlock()
	return errors.Join(errs...)
}

// scratches returns a copy of the scratch map, so that each scratch's lock is taken
// without b.mu held: an op holding one may need b.mu (to keep a fault).
func (b *Backend) scratches() map[device.Stream]*scratch {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.scratch)
}

// KernelAttributes loads every family and reports each kernel's attributes (registers,
// spills, the SASS it runs), by name: for tests and `sublet info`.
func (b *Backend) KernelAttributes() (map[string]cudadev.FunctionAttributes, error) {
	out := make(map[string]cudadev.FunctionAttributes, numKernels)
	for k, e := range entries {
		if e.name == "" {
			continue
		}
		fn, err := b.mods.function(kernel(k))
		if err != nil {
			return nil, err
		}
		a, err := fn.Attributes()
		if err != nil {
			return nil, err
		}
		out[e.name] = a
	}
	return out, nil
}

// Launches returns how many kernels and cuBLAS products the Backend of dev (a GPU, or
// a device that wraps one: device.Innermost) has launched since it was made, 0 where
// there is none: what a profiler counts per op.
func Launches(dev device.Device) int64 {
	if b := existing(device.Innermost(dev)); b != nil {
		return b.launches.Load()
	}
	return 0
}

// existing returns the Backend For has made for dev, nil when dev is no GPU or For
// has made none (so nothing is loaded or created for a report).
func existing(dev device.Device) *Backend {
	g, ok := dev.(*cudadev.Device)
	if !ok {
		return nil
	}
	if b, ok := registry.m.Load(g); ok {
		return b.(*Backend)
	}
	return nil
}

// HeldInAllocator returns the bytes the Backend of dev (if dev is a GPU with one)
// keeps in dev's caching allocator, its cuBLAS workspaces, and 0 for any other device:
// what a memory report names apart from tensors.
func HeldInAllocator(dev device.Device) int64 {
	b := existing(dev)
	if b == nil {
		return 0
	}
	var n int64
	for _, h := range b.Held() {
		if h.Allocator {
			n += h.Bytes
		}
	}
	return n
}
