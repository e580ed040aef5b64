package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/subletml/sublet/kernels"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
)

// refConvert converts x (a value of type from) to type to by Copy's documented rules,
// returned as the float64 the test's view reads back.
func refConvert(from, to dtype.DType, x float64) float64 {
	switch to {
	case dtype.F64, dtype.F32, dtype.F16, dtype.BF16:
		return roundTo(to, x)
	case dtype.Bool:
		if x != 0 {
			return 1
		}
		return 0
	}
	if from.IsFloat() {
		lo, hi := float64(math.MinInt32), float64(math.MaxInt32)
		if to == dtype.I64 {
			lo, hi = math.MinInt64, math.MaxInt64
		}
		switch {
		case math.IsNaN(x):
			return 0
		case x <= lo:
			return lo
		case x >= hi:
			return hi
		}
		return math.Trunc(x)
	}
	if to == dtype.I32 {
		return float64(int32(int64(x)))
	}
	return x
}

func TestCopyAllTypePairs(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 21))
	for _, from := range dtype.All() {
		for _, to := range dtype.All() {
			for range 8 {
				shape := randShape(r, r.IntN(4), 6)
				gen := func() float64 {
					switch from {
					case dtype.Bool:
						return float64(r.IntN(2))
					case dtype.I32, dtype.I64:
						return float64(r.IntN(2001) - 1000)
					}
					return 400*r.Float64() - 200
				}
				srcShape := shape
				if r.IntN(3) == 0 {
					srcShape = broadcastShape(r, shape)
				}
				src := randView(r, from, srcShape, gen)
				dst := randView(r, to, shape, func() float64 { return 7 })
				Copy(dst.op(), src.op())
				forEachIndex(shape, func(idx []int) {
					want := refConvert(from, to, src.get(idx))
					require.Equal(t, want, dst.get(idx), "%v->%v at %v (src %v)", from, to, idx, src.get(idx))
				})
			}
		}
	}
}

func TestCopyConversionEdges(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	src := []float32{nan, inf, -inf, 3e9, -3e9, 2.9, -2.9, 1e20, -1e20}
	l := kernels.Contiguous(len(src))
	i32 := make([]int32, len(src))
	Copy(I32(i32, l), F32(src, l))
	assert.Equal(t, []int32{0, math.MaxInt32, math.MinInt32, math.MaxInt32, math.MinInt32, 2, -2, math.MaxInt32, math.MinInt32}, i32)
	i64 := make([]int64, len(src))
	Copy(I64(i64, l), F32(src, l))
	assert.Equal(t, []int64{0, math.MaxInt64, math.MinInt64, 3e9, -3e9, 2, -2, math.MaxInt64, math.MinInt64}, i64)
	b := make([]uint8, len(src))
	Copy(Bool(b, l), F32(src, l))
	assert.Equal(t, []uint8{1, 1, 1, 1, 1, 1, 1, 1, 1}, b)

	big := []int64{1<<40 + 5, -1, 1 << 62}
	l3 := kernels.Contiguous(3)
	w := make([]int32, 3)
	Copy(I32(w, l3), I64(big, l3))
	assert.Equal(t, []int32{5, -1, 0}, w, "int64 to int32 wraps")
	back := make([]int64, 3)
	Copy(I64(back, l3), I64(big, l3))
	assert.Equal(t, big, back, "int64 copies exactly, never through float")
}

func TestCopyLargeTranspose(t *testing.T) {
	// A transpose big enough to split across goroutines.
	rows, cols := 300, 211
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(i)
	}
	dst := make([]float32, rows*cols)
	tr := kernels.Layout{Shape: []int{cols, rows}, Strides: []int{1, cols}}
	Copy(F32(dst, kernels.Contiguous(cols, rows)), F32(src, tr))
	for i := range cols {
		for j := range rows {
			require.Equal(t, src[j*cols+i], dst[i*rows+j])
		}
	}
}

func TestFill(t *testing.T) {
	r := rand.New(rand.NewPCG(22, 23))
	for _, dt := range dtype.All() {
		for _, v := range []float64{0, 1.5, -2, math.NaN(), 1e10} {
			shape := randShape(r, 3, 5)
			dst := randView(r, dt, shape, func() float64 { return 3 })
			keep := make([]float64, dst.bufLen())
			for i := range keep {
				keep[i] = dst.at(i)
			}
			Fill(dst.op(), v)
			touched := map[int]bool{}
			forEachIndex(shape, func(idx []int) {
				touched[pos(dst.l, idx)] = true
				want := refConvert(dtype.F32, dt, float64(float32(v)))
				if dt.IsFloat() && math.IsNaN(v) {
					require.True(t, math.IsNaN(dst.get(idx)))
					return
				}
				require.Equal(t, want, dst.get(idx), "%v fill %v", dt, v)
			})
			for i := range keep {
				if !touched[i] {
					require.Equal(t, keep[i], dst.at(i), "%v: Fill wrote outside the layout at %d", dt, i)
				}
			}
		}
	}
}

func TestAxpy(t *testing.T) {
	r := rand.New(rand.NewPCG(24, 25))
	for range 50 {
		shape := randShape(r, r.IntN(4), 6)
		dt := pick(r, floatTypes)
		dst := randView(r, dt, shape, func() float64 { return r.Float64() })
		x := randView(r, pick(r, floatTypes), broadcastShape(r, shape), func() float64 { return r.Float64() })
		before := map[int]float64{}
		forEachIndex(shape, func(idx []int) { before[pos(dst.l, idx)] = dst.get(idx) })
		Axpy(dst.op(), -0.5, x.op())
		forEachIndex(shape, func(idx []int) {
			want := roundTo(dt, before[pos(dst.l, idx)]-0.5*x.get(idx))
			requireClose(t, dt, want, dst.get(idx), "axpy at %v", idx)
		})
	}
}

// An output with no elements is writable whatever its strides: row-major strides of
// [3 0] are [0 1], which would otherwise read as a repeated element.
func TestEmptyOutputsWriteNothing(t *testing.T) {
	empty := kernels.Contiguous(3, 0)
	require.Equal(t, []int{0, 1}, empty.Strides)
	dst := F32(nil, empty)
	require.NotPanics(t, func() { Fill(dst, 1) })
	require.NotPanics(t, func() { Copy(dst, F32(nil, kernels.Contiguous(3, 0))) })
	require.NotPanics(t, func() { Unary(kernels.Exp, dst, F32(nil, kernels.Contiguous(3, 0))) })
	require.Panics(t, func() { Fill(F32(make([]float32, 1), kernels.Layout{Shape: []int{3}, Strides: []int{0}}), 1) },
		"a non-empty output that repeats an element is still refused")
}

// TestFillBits: the bits Fill writes (and a GPU backend fills with), per type, with
// rounding, saturation and NaN; no allocation, as a launch's host side needs.
func TestFillBits(t *testing.T) {
	for _, c := range []struct {
		dt   dtype.DType
		v    float64
		want uint64
	}{
		{dtype.F64, 0.1, math.Float64bits(0.1)},
		{dtype.F32, 0.1, uint64(math.Float32bits(0.1))},
		{dtype.F32, math.Copysign(0, -1), 0x80000000},
		{dtype.F16, 65519, 0x7BFF},    // rounds down to the largest half
		{dtype.F16, 65520, 0x7C00},    // rounds to +Inf
		{dtype.F16, 1.0 / 3, 0x3555},  // once from float64
		{dtype.BF16, 1.0 / 3, 0x3EAB}, // once from float64
		{dtype.I32, 3e9, math.MaxInt32},
		{dtype.I32, -2.75, uint64(0xFFFFFFFE)}, // toward zero: -2
		{dtype.I32, math.NaN(), 0},
		{dtype.I64, -1e300, 1 << 63},
		{dtype.Bool, -0.5, 1},
		{dtype.Bool, 0, 0},
	} {
		assert.Equal(t, c.want, FillBits(c.dt, c.v), "%v %v", c.dt, c.v)
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { FillBits(dtype.F16, 0.5) }))
}
