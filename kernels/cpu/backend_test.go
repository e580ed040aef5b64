package cpu

import (
	"math"
	"slices"
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

// The Backend's Unary and Binary run dense float32 operands on their host bytes
// directly (denseF32); each op gives the bits the package's own Unary and Binary give,
// at an offset, in place, and on operands the fast path turns away (a broadcast input,
// a transposed one), and a malformed operand panics as the general path does.
func TestBackendDensePathMatchesTheKernels(t *testing.T) {
	be := NewBackend(nil)
	const n = 37
	x, y := make([]float32, n+3), make([]float32, n+5)
	for i := range x {
		x[i] = float32(i%11)/3 - 1.5
	}
	for i := range y {
		y[i] = float32(i%7)/2 + 0.25
	}
	dense := func(off int) kernels.Layout { l := kernels.Contiguous(n); l.Offset = off; return l }
	for op := kernels.Neg; op.Valid(); op++ {
		got, want := make([]float32, n+1), make([]float32, n+1)
		be.Unary(op, f32Operand(got, dense(1)), f32Operand(x, dense(3)))
		Unary(op, F32(want, dense(1)), F32(x, dense(3)))
		requireSameBits(t, want, got, op.String())
	}
	for op := kernels.Add; op.Valid(); op++ {
		got, want := make([]float32, n), make([]float32, n)
		be.Binary(op, f32Operand(got, dense(0)), f32Operand(x, dense(2)), f32Operand(y, dense(5)))
		Binary(op, F32(want, dense(0)), F32(x, dense(2)), F32(y, dense(5)))
		requireSameBits(t, want, got, op.String())

		inPlace := slices.Clone(y)
		be.Binary(op, f32Operand(inPlace, dense(5)), f32Operand(x, dense(2)), f32Operand(inPlace, dense(5)))
		requireSameBits(t, want, inPlace[5:], op.String()+" in place")

		// [n, 1] against [1, n] broadcast, and a transposed input: the general path.
		col := kernels.Layout{Shape: []int{n, 1}, Strides: []int{1, 1}}
		row := kernels.Layout{Shape: []int{1, n}, Strides: []int{n, 1}}
		out := kernels.Contiguous(n, n)
		got, want = make([]float32, n*n), make([]float32, n*n)
		be.Binary(op, f32Operand(got, out), f32Operand(x, col), f32Operand(y, row))
		Binary(op, F32(want, out), F32(x, col), F32(y, row))
		requireSameBits(t, want, got, op.String()+" broadcast")
	}
	short := f32Operand(x, dense(4)) // reaches past x
	require.PanicsWithValue(t, "kernels/cpu: FromBytes float32: layout (shape [37] strides [1] offset 4) reaches element 40 of a buffer of 40",
		func() { be.Binary(kernels.Add, f32Operand(make([]float32, n), dense(0)), short, short) })
}

// requireSameBits fails unless got holds the bits of want (NaNs included).
func requireSameBits(t *testing.T, want, got []float32, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "%s: element %d", msg, i)
	}
}
