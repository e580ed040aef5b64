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
// kernels/cuda on a GPU. It panics with an *Error naming op and its inputs ins where
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
	if g, ok := dev.(*cudadev.Device); ok {
		k, err := cuda.For(g)
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
	g, ok := dev.(*cudadev.Device)
	if !ok {
		return nil
	}
	k, err := cuda.For(g)
	if err != nil {
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
	if err := dev.Synchronize(); err != nil {
		return err
	}
	return asyncErrors(dev)
}
