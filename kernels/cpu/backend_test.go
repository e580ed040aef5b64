package cpu

import (
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// f64Operand is a contiguous F64 kernels.Operand over v.
func f64Operand(v []float64) kernels.Operand {
	b := unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 8*len(v))
	return kernels.Operand{Layout: kernels.Contiguous(len(v)), DType: dtype.F64, Mem: kernels.Mem{Host: b, Size: int64(len(b))}}
}

// A Scalar is a number of the op: in an F64 op it is read in float64, whatever the
// method (as Binary reads it), so 0.1 is not the float32 0.1.
func TestScalarsOfF64OpsAreFloat64(t *testing.T) {
	b := NewBackend(nil)
	out := make([]float64, 2)
	dst := f64Operand(out)
	const v = 0.1
	checks := []struct {
		name string
		run  func()
		want float64
	}{
		{"Unary", func() { b.Unary(kernels.Neg, dst, kernels.Scalar(v)) }, -v},
		{"Copy", func() { b.Copy(dst, kernels.Scalar(v)) }, v},
		{"Binary", func() { b.Binary(kernels.Add, dst, kernels.Scalar(v), kernels.Scalar(0)) }, v},
		{"Addc", func() { b.Addc(kernels.Mul, dst, kernels.Scalar(v), kernels.Scalar(1), kernels.Scalar(1), 1) }, v + 1},
		{"Axpy", func() {
			out[0], out[1] = 0, 0
			b.Axpy(dst, 1, kernels.Scalar(v))
		}, v},
		{"BinaryCrossEntropy", func() { require.NoError(t, b.BinaryCrossEntropy(dst, kernels.Scalar(v), kernels.Scalar(1))) }, -math.Log(v)},
	}
	for _, c := range checks {
		c.run()
		require.Equal(t, []float64{c.want, c.want}, out, c.name)
	}
}
