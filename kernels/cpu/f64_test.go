package cpu

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// F64 operands compute in float64: values that float32 cannot tell apart stay apart,
// and values beyond float32's range stay finite.
func TestF64NeverGoesThroughFloat32(t *testing.T) {
	l := kernels.Contiguous(3)
	x := []float64{1 + 1e-12, 1, 1e300}
	out := make([]float64, 3)

	Binary(kernels.Sub, F64(out, l), F64(x, l), F64([]float64{1, 1, 1e299}, l))
	assert.Equal(t, []float64{x[0] - 1, 0, x[2] - 1e299}, out)
	assert.NotZero(t, out[0], "1+1e-12 is 1 in float32")
	Unary(kernels.Exp, F64(out[:2], kernels.Contiguous(2)), F64([]float64{1e-12, 700}, kernels.Contiguous(2)))
	assert.Equal(t, []float64{math.Exp(1e-12), math.Exp(700)}, out[:2], "math.Exp, finite beyond float32")
	Unary(kernels.Tanh, F64(out[:1], kernels.Contiguous(1)), F64([]float64{0.3}, kernels.Contiguous(1)))
	assert.Equal(t, math.Tanh(0.3), out[0])

	// Sums written out below run in float64 at run time (constant expressions would be
	// exact).
	tenth, fifth, big := 0.1, 0.2, 1e300
	// A scalar is read in the op's type: 0.1 exactly for F64, float32(0.1) for F32.
	f64Scalar := func(s []float64) kernels.Operand {
		return kernels.Operand{DType: dtype.F64, Mem: kernels.Mem{Host: bytes64(s)}}
	}
	dst := []float64{0}
	NewBackend(nil).Binary(kernels.Add, f64Scalar(dst), f64Scalar([]float64{0.2}), kernels.Scalar(0.1))
	assert.Equal(t, fifth+tenth, dst[0])
	d32 := make([]float32, 1)
	Binary(kernels.Add, F32(d32, kernels.Layout{}), F32([]float32{0.2}, kernels.Layout{}), operandIn(kernels.Scalar(0.1), dtype.F32))
	assert.Equal(t, float32(fifth)+float32(tenth), d32[0], "an F32 op stays in float32 with a scalar")

	assert.False(t, NonFinite(F64(x, l)), "1e300 is finite in float64")
	assert.True(t, NonFinite(F64([]float64{1, math.Inf(-1)}, kernels.Contiguous(2))))
	g := []float64{1e300, 3}
	assert.False(t, Unscale(F64(g, kernels.Contiguous(2)), 0.1))
	assert.Equal(t, []float64{big * tenth, 3 * tenth}, g)

	// Sums and maxima in float64.
	var s [1]float64
	vals := []float64{0.1, 0.2, 0.3, 1e-17}
	Sum(F64(s[:], kernels.Layout{}), F64(vals, kernels.Contiguous(4)))
	assert.Equal(t, vals[0]+vals[1]+vals[2]+vals[3], s[0])
	idx := make([]int64, 1)
	Max(F64(s[:], kernels.Layout{}), idx, F64([]float64{1, 1 + 1e-12, 1}, kernels.Contiguous(3)))
	assert.Equal(t, []int64{1}, idx)
	assert.Equal(t, 1+1e-12, s[0])

	// Fill and Copy keep float64 values; to F16 they round once.
	Fill(F64(out, l), 0.1)
	assert.Equal(t, []float64{0.1, 0.1, 0.1}, out)
	tie := float64(dtype.F16ToF32(0x3c00)) + math.Ldexp(1, -11) // 1 + half an F16 ulp
	above := math.Nextafter(tie, 2)
	h := make([]uint16, 2)
	Copy(F16(h, kernels.Contiguous(2)), F64([]float64{tie, above}, kernels.Contiguous(2)))
	assert.Equal(t, []uint16{0x3c00, 0x3c01}, h, "the tie goes to even, just above it up (float32 first would give 0x3c00)")
	i64 := []int64{1<<53 + 1, -3}
	Copy(F64(out[:2], kernels.Contiguous(2)), I64(i64, kernels.Contiguous(2)))
	assert.Equal(t, []float64{1 << 53, -3}, out[:2], "int64 to float64 rounds to nearest, not through float32")
}

// bytes64 is the memory of s, as a host Mem holds it.
func bytes64(s []float64) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 8*len(s)) }

// A float64 product of F64 operands runs on gonum's Dgemm as they are (contiguous or
// transposed) and on converted blocks otherwise; both agree with a float64 reference
// and their bits do not depend on GOMAXPROCS.
func TestMatmulF64(t *testing.T) {
	r := rand.New(rand.NewPCG(120, 121))
	m, k, n := 70, block64+9, 65
	a := randView(r, dtype.F64, []int{m, k}, r.NormFloat64)
	a = contiguousView(dtype.F64, a.l.Shape, r.NormFloat64)
	bt := contiguousView(dtype.F64, []int{n, k}, r.NormFloat64) // b stored transposed
	b := bt
	b.l = kernels.Layout{Shape: []int{k, n}, Strides: []int{1, k}}
	ref := func(i, j int) float64 {
		s := 0.0
		for p := range k {
			s += a.f64[i*k+p] * bt.f64[j*k+p]
		}
		return s
	}
	run := func(dst view, a, b view) []float64 {
		Matmul(nil, dst.op(), a.op(), b.op(), 1, 0)
		out := make([]float64, m*n)
		forEachIndex([]int{m, n}, func(idx []int) { out[idx[0]*n+idx[1]] = dst.get(idx) })
		return out
	}
	direct := run(contiguousView(dtype.F64, []int{m, n}, math.NaN), a, b)
	strided := randView(r, dtype.F64, []int{m, k}, func() float64 { return 0 }) // a copied into a strided layout
	forEachIndex([]int{m, k}, func(idx []int) { strided.f64[pos(strided.l, idx)] = a.f64[idx[0]*k+idx[1]] })
	half := contiguousView(dtype.F32, []int{m, n}, math.NaN) // an F32 output of an F64 product
	blocked := run(contiguousView(dtype.F64, []int{m, n}, math.NaN), strided, b)
	run(half, a, b)
	for i := range m {
		for j := range n {
			want := ref(i, j)
			require.InDelta(t, want, direct[i*n+j], 1e-12*(1+math.Abs(want)), "direct at %d,%d", i, j)
			require.InDelta(t, want, blocked[i*n+j], 1e-12*(1+math.Abs(want)), "blocked at %d,%d", i, j)
			require.Equal(t, float32(direct[i*n+j]), half.f32[i*n+j], "an F32 output is the float64 product rounded once")
		}
	}
	prev := runtime.GOMAXPROCS(1)
	serial := run(contiguousView(dtype.F64, []int{m, n}, math.NaN), a, b)
	runtime.GOMAXPROCS(prev)
	assert.Equal(t, direct, serial, "the same bits on one thread")
}
