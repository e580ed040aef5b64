package tensor

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/subletml/sublet/device"
	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/cpu"
	"github.com/subletml/sublet/kernels/cpu/blas"
	"github.com/subletml/sublet/kernels/cuda"
)

// hostKernels is the CPU backend every host-resident storage computes with, made on
// first use with the GEMM that SUBLET_BLAS names (kernels/cpu/blas: unset or builtin
// is the built-in GEMM). A SUBLET_BLAS that cannot be loaded is an error of every op
// on host memory, naming the variable, rather than a silent fall back.
var hostKernels = sync.OnceValues(func() (kernels.Backend, error) {
	g, err := blas.FromEnv()
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w (unset it for the built-in GEMM)", blas.Env, os.Getenv(blas.Env), err)
	}
	return cpu.NewBackend(g), nil
})

// HostGemm names the GEMM the CPU kernels use for float32 products ("builtin-avx2",
// or the system BLAS SUBLET_BLAS names), or returns why SUBLET_BLAS cannot be used.
func HostGemm() (string, error) {
	k, err := hostKernels()
	if err != nil {
		return "", err
	}
	return k.(*cpu.Backend).Gemm().Name(), nil
}

// kernelsFor returns the kernels that compute on dev's memory for op: the CPU kernels
// on host memory, the meta backend (which computes nothing) where there is no data,
// kernels/cuda on a GPU or a device that wraps one. It panics with an *Error naming op and its inputs ins where
// there are none.
func kernelsFor(op string, dev device.Device, ins []*Tensor) kernels.Backend {
	switch dev.Residency() {
	case device.Host:
		k, err := hostKernels()
		if err != nil {
			fail(op, err, ins, "")
		}
		return k
	case device.Meta:
		return kernels.Meta()
	}
	if k, err := gpuKernels(dev); k != nil || err != nil {
		if err != nil {
			fail(op, err, ins, "")
		}
		return k
	}
	fail(op, ErrNoKernels, ins, "%s has no kernels (cpu, sim and cuda do); move the tensors with To", dev.Name())
	return nil
}

// asyncErrors returns what dev's asynchronous kernels (kernels.Async) found since the
// last check: an index out of range (also an ErrIndex, as the CPU kernels report it at
// once), a launch that failed. nil on devices whose kernels are synchronous. It is
// called where values come back to the host, the synchronisation points.
func asyncErrors(dev device.Device) error {
	k, err := gpuKernels(dev)
	if k == nil {
		return err
	}
	err = kernels.Async(k).Check()
	if ie := new(kernels.IndexError); errors.As(err, &ie) {
		err = indexError{err}
	}
	return err
}

// Synchronize waits until every op ordered on dev so far has run, and returns the
// errors its asynchronous kernels found since the last synchronisation (an index out
// of range in cross entropy or embedding on a GPU, as an *kernels.IndexError naming the
// op): ToSlice, Item and To a host device check the same, and panic with them. On
// host devices ops are synchronous and it returns nil.
func Synchronize(dev device.Device) error {
	if err := notCapturing(dev, "Synchronize"); err != nil {
		return err
	}
	if err := dev.Synchronize(); err != nil {
		return err
	}
	return asyncErrors(dev)
}

// BackendHeld returns the bytes dev's kernels keep in dev's caching allocator between
// ops, outside any tensor: on a GPU the cuBLAS workspaces that products take (32 MiB
// per stream on an H100 or H200, as PyTorch sizes them, and counted in the allocator's
// statistics as PyTorch counts its own in memory_allocated); 0 on every other device,
// a device that wraps a GPU among them (the kernels take their memory from the GPU's
// own allocator, not from the wrapper's).
// Memory reports name it apart from tensors, and every identity of the form "the
// allocator holds the parameters + the optimizer state" subtracts it.
func BackendHeld(dev device.Device) int64 { return cuda.HeldInAllocator(dev) }

// ReleaseBackend waits for dev's work and gives back what dev's kernels keep (see
// BackendHeld; on a GPU also their scratch and error flag), as PyTorch's
// torch._C._cuda_clearCublasWorkspaces does; the next op that needs them takes them
// again. A program calls it before the allocator's EmptyCache when it wants nothing
// left, and a device's Close refuses while its kernels hold memory. It does nothing on
// devices whose kernels keep nothing.
func ReleaseBackend(dev device.Device) error {
	k, err := gpuKernels(dev)
	if k == nil {
		return err
	}
	if n := liveGraphs(dev); n > 0 {
		return fmt.Errorf("tensor: ReleaseBackend(%s): %d captured graph(s) address the kernels' scratch and workspaces; Release them first", dev.Name(), n)
	}
	return k.Release()
}

// gpuKernels returns the CUDA kernels of dev, or of the GPU it wraps
// (device.Innermost), or nil and no error where there is no GPU.
func gpuKernels(dev device.Device) (*cuda.Backend, error) {
	g, ok := device.Innermost(dev).(*cudadev.Device)
	if !ok {
		return nil, nil
	}
	return cuda.For(g)
}
