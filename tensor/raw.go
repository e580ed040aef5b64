package tensor

import (
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels/cpu"
)

// The raw accessors below let packages built on kernels/cpu (optimizers, the gradient
// scaler) run a kernel on a tensor's memory directly. They alias device memory: a
// write through them is an in-place write, to be followed by t.Storage().BumpVersion().
// ok is false where the device keeps no data (the meta device): skip the computation
// there. They panic on a released tensor and on a device without kernels.

// KernelOperand returns t as an operand of the elementwise, copy and reduction kernels.
func (t *Tensor) KernelOperand() (o cpu.Operand, ok bool) {
	t.rawAccess("KernelOperand")
	if t.st.host == nil {
		return cpu.Operand{}, false
	}
	return t.operand(), true
}

// Float32Data returns the elements of a contiguous F32 tensor, for the dense kernels
// (GEMM, optimizer steps).
func (t *Tensor) Float32Data() (data []float32, ok bool) {
	t.rawAccess("Float32Data")
	if t.dt != dtype.F32 || !t.IsContiguous() {
		fail("Float32Data", ErrDType, []*Tensor{t}, "needs a contiguous F32 tensor (strides %v)", t.strides)
	}
	if t.st.host == nil {
		return nil, false
	}
	return float32s(t), true
}

func (t *Tensor) rawAccess(op string) {
	t.live(op)
	if !hostCapable(t.st.dev) {
		fail(op, ErrNoKernels, []*Tensor{t}, "%s has no kernels yet", t.st.dev.Name())
	}
}
