package cuda

import (
	"sync"

	"github.com/subletml/sublet/device"
	cudadev "github.com/subletml/sublet/device/cuda"
)

// recorder keeps the launches and cuBLAS calls of a Backend that this package's tests
// made without a GPU: nothing runs and no device memory is touched (device pointers
// are made up). The tests check every launch's arguments against the kernel's
// parameters in the PTX, and the host-side choices (walks, pieces, cuBLAS arguments)
// against kernels/cpu's semantics. Production Backends have none. It copies what it
// is given (a concrete type, so the compiler sees that the arguments do not escape
// and production launches stay free of heap allocations).
type recorder struct {
	mu sync.Mutex // guards launches and calls: tests record from many goroutines
	// Guarded by mu.
	launches []launchRec
	calls    []libRec
}

// launchRec is one recorded launch.
type launchRec struct {
	k    kernel
	cfg  cudadev.LaunchConfig
	args []argRec
}

// argRec is one argument, its bytes copied (an ArgBytes struct lives only for the call).
type argRec struct {
	size  int
	bits  uint64
	bytes []byte
}

// libRec is one recorded cuBLAS call.
type libRec struct {
	name string
	args []uintptr
}

func (r *recorder) launch(k kernel, cfg cudadev.LaunchConfig, args []cudadev.Arg) {
	l := launchRec{k: k, cfg: cfg}
	for _, a := range args {
		l.args = append(l.args, argRec{size: a.Size(), bits: a.Bits(), bytes: append([]byte(nil), a.Bytes()...)})
	}
	r.mu.Lock()
	r.launches = append(r.launches, l)
	r.mu.Unlock()
}

func (r *recorder) library(name string, args []uintptr) {
	c := libRec{name: name, args: append([]uintptr(nil), args...)}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

// take returns what was recorded since the last take.
func (r *recorder) take() ([]launchRec, []libRec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, c := r.launches, r.calls
	r.launches, r.calls = nil, nil
	return l, c
}

// recordedPtr is the device address a recording Backend hands out for its own memory.
const recordedPtr device.Ptr = 0x7e57_0000

// The device operations of the Backend's own memory, which a recording Backend skips.

func (b *Backend) malloc(n int64) (device.Ptr, error) {
	if b.rec != nil {
		return recordedPtr, nil
	}
	return b.dev.Malloc(n)
}

func (b *Backend) free(p device.Ptr) error {
	if b.rec != nil {
		return nil
	}
	return b.dev.Free(p)
}

func (b *Backend) memset(p device.Ptr, n int64, s device.Stream) error {
	if b.rec != nil {
		return nil
	}
	return b.dev.Memset(p, 0, n, s)
}

func (b *Backend) copyOnDevice(dst, src device.Ptr, n int64, s device.Stream) error {
	if b.rec != nil {
		return nil
	}
	return b.dev.CopyOnDevice(dst, src, n, s)
}

func (b *Backend) copyToHost(dst []byte, p device.Ptr, s device.Stream) error {
	if b.rec != nil {
		clear(dst)
		return nil
	}
	return b.dev.CopyToHost(dst, p, s)
}

func (b *Backend) copyToDevice(p device.Ptr, src []byte, s device.Stream) error {
	if b.rec != nil {
		return nil
	}
	return b.dev.CopyToDevice(p, src, s)
}

func (b *Backend) synchronize() error {
	if b.rec != nil {
		return nil
	}
	return b.dev.Synchronize()
}

// name is the device's name for messages.
func (b *Backend) name() string {
	if b.rec != nil {
		return "cuda:recorded"
	}
	return b.dev.Name()
}
