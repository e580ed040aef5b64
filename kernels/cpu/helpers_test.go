package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/subletml/sublet/kernels"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
)

// view is a test tensor: a buffer of some dtype and a layout into it.
type view struct {
	dt  dtype.DType
	f64 []float64
	f32 []float32
	u16 []uint16
	i32 []int32
	i64 []int64
	u8  []uint8
	l   kernels.Layout
}

func (v *view) op() Operand {
	switch v.dt {
	case dtype.F64:
		return F64(v.f64, v.l)
	case dtype.F32:
		return F32(v.f32, v.l)
	case dtype.F16:
		return F16(v.u16, v.l)
	case dtype.BF16:
		return BF16(v.u16, v.l)
	case dtype.I32:
		return I32(v.i32, v.l)
	case dtype.I64:
		return I64(v.i64, v.l)
	}
	return Bool(v.u8, v.l)
}

// at reads the element at buffer position p as float64.
func (v *view) at(p int) float64 {
	switch v.dt {
	case dtype.F64:
		return v.f64[p]
	case dtype.F32:
		return float64(v.f32[p])
	case dtype.F16:
		return float64(dtype.F16ToF32(v.u16[p]))
	case dtype.BF16:
		return float64(dtype.BF16ToF32(v.u16[p]))
	case dtype.I32:
		return float64(v.i32[p])
	case dtype.I64:
		return float64(v.i64[p])
	}
	return float64(v.u8[p])
}

func (v *view) set(p int, x float64) {
	switch v.dt {
	case dtype.F64:
		v.f64[p] = x
	case dtype.F32:
		v.f32[p] = float32(x)
	case dtype.F16:
		v.u16[p] = dtype.F64ToF16(x)
	case dtype.BF16:
		v.u16[p] = dtype.F64ToBF16(x)
	case dtype.I32:
		v.i32[p] = int32(x)
	case dtype.I64:
		v.i64[p] = int64(x)
	default:
		v.u8[p] = uint8(x)
	}
}

func (v *view) bufLen() int {
	return len(v.f64) + len(v.f32) + len(v.u16) + len(v.i32) + len(v.i64) + len(v.u8)
}

// get reads the element at a multi-index of v's layout.
func (v *view) get(idx []int) float64 { return v.at(pos(v.l, idx)) }

// pos is the buffer position of a multi-index, straight from the Layout definition,
// with the index right-aligned against the layout's shape and broadcast where the
// layout's size is 1.
func pos(l kernels.Layout, idx []int) int {
	d := len(idx) - len(l.Shape)
	p := l.Offset
	for i := range l.Shape {
		if l.Shape[i] > 1 {
			p += idx[d+i] * l.Strides[i]
		}
	}
	return p
}

// forEachIndex calls fn with every multi-index of shape in row-major order.
func forEachIndex(shape []int, fn func(idx []int)) {
	for _, d := range shape {
		if d == 0 {
			return
		}
	}
	idx := make([]int, len(shape))
	for {
		fn(idx)
		i := len(shape) - 1
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < shape[i] {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return
		}
	}
}

func newBuf(dt dtype.DType, n int) view {
	v := view{dt: dt}
	switch dt {
	case dtype.F64:
		v.f64 = make([]float64, n)
	case dtype.F32:
		v.f32 = make([]float32, n)
	case dtype.F16, dtype.BF16:
		v.u16 = make([]uint16, n)
	case dtype.I32:
		v.i32 = make([]int32, n)
	case dtype.I64:
		v.i64 = make([]int64, n)
	default:
		v.u8 = make([]uint8, n)
	}
	return v
}

// randView makes a tensor of shape whose layout is a random permutation of a dense
// buffer, with a random offset, gaps between elements (every other element) and, for
// some dimensions, a broadcast stride of 0 over a size-1 base; elements are filled by
// gen. The layout is not contiguous unless the dice say so.
func randView(r *rand.Rand, dt dtype.DType, shape []int, gen func() float64) view {
	rank := len(shape)
	perm := r.Perm(rank)
	strides := make([]int, rank)
	step := 1 + r.IntN(2)
	s := step
	for _, d := range perm {
		strides[d] = s
		s *= max(shape[d], 1)
	}
	off := r.IntN(3)
	l := kernels.Layout{Shape: append([]int(nil), shape...), Strides: strides, Offset: off}
	v := newBuf(dt, off+s+r.IntN(3))
	for i := range v.bufLen() {
		v.set(i, gen())
	}
	v.l = l
	return v
}

// contiguousView is a dense row-major tensor of shape, filled by gen.
func contiguousView(dt dtype.DType, shape []int, gen func() float64) view {
	l := kernels.Contiguous(shape...)
	v := newBuf(dt, l.Size())
	for i := range v.bufLen() {
		v.set(i, gen())
	}
	v.l = l
	return v
}

func randShape(r *rand.Rand, rank, maxDim int) []int {
	s := make([]int, rank)
	for i := range s {
		s[i] = 1 + r.IntN(maxDim)
	}
	return s
}

// broadcastShape returns shape with some dimensions set to 1 and some leading ones
// dropped, so that it broadcasts back to shape.
func broadcastShape(r *rand.Rand, shape []int) []int {
	drop := r.IntN(len(shape) + 1)
	if r.IntN(2) == 0 {
		drop = 0
	}
	out := append([]int(nil), shape[drop:]...)
	for i := range out {
		if r.IntN(3) == 0 {
			out[i] = 1
		}
	}
	return out
}

// tol is the error a float kernel may make against a float64 reference, given the
// output dtype: float32 (float64 for F64) arithmetic error, or one rounding of the
// output format.
func tol(dt dtype.DType, want float64) float64 {
	a := math.Abs(want)
	switch dt {
	case dtype.F64:
		return 1e-12*a + 1e-14
	case dtype.F16:
		return 1e-3*a + 1e-4
	case dtype.BF16:
		return 8e-3*a + 1e-4
	}
	return 2e-5*a + 1e-6
}

func requireClose(t *testing.T, dt dtype.DType, want, got float64, msg string, args ...any) {
	t.Helper()
	if math.IsNaN(want) {
		require.Truef(t, math.IsNaN(got), msg+": want NaN, got %v", append(args, got)...)
		return
	}
	if math.IsInf(want, 0) || math.Abs(want) > 6e4 && dt == dtype.F16 {
		if math.IsInf(got, 0) {
			require.Equalf(t, math.Signbit(want), math.Signbit(got), msg, args...)
			return
		}
	}
	require.InDeltaf(t, want, got, tol(dt, want), msg, args...)
}

var floatTypes = []dtype.DType{dtype.F32, dtype.F16, dtype.BF16, dtype.F64}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// roundTo rounds x to what dt can hold, as the kernels' inputs and outputs are.
func roundTo(dt dtype.DType, x float64) float64 {
	if dt.IsFloat() {
		return dt.Round(x)
	}
	return float64(float32(x))
}

// wider is F64 when a or b is, else a: the type a test keeps an intermediate in so
// that an F64 result is checked at float64 precision.
func wider(a, b dtype.DType) dtype.DType {
	if b == dtype.F64 {
		return b
	}
	return a
}

// bothTypes runs a kernel test in float32 and in float64.
func bothTypes(t *testing.T, f32, f64 func(t *testing.T)) {
	t.Run("float32", f32)
	t.Run("float64", f64)
}

// tl is a test's tolerance for kernels computing in T: f32 in float32, f64 in float64.
func tl[T float](f32, f64 float64) float64 {
	if is32[T]() {
		return f32
	}
	return f64
}
