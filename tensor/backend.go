package tensor

import (
	"fmt"
	"os"
	"sync"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/cpu"
	"github.com/subletml/sublet/kernels/cpu/blas"
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
// on host memory, the meta backend (which computes nothing) where there is no data. It
// panics with an *Error naming op and its inputs ins where there are none.
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
	fail(op, ErrNoKernels, ins, "%s has no kernels yet (only cpu and sim do); move the tensors with To", dev.Name())
	return nil
}
