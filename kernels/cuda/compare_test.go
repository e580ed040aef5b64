package cuda

import (
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// exerciseCompare is exercise's part for the comparison family: every kernel, its
// 64-bit index variant included.
func exerciseCompare(b *Backend, o *operands) {
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16, dtype.F64, dtype.I32, dtype.I64, dtype.Bool} {
		x := o.dense(dt, 4, 5)
		row := o.dense(dtype.I64, 5)
		mask := o.dense(dtype.Bool, 4, 5)
		for op := kernels.Eq; op.Valid(); op++ {
			b.Compare(op, mask, x, row)
			b.Compare(op, mask, kernels.Scalar(2), x)
		}
		b.Sum(o.dense(dtype.F32, 4, 1), x)
		if dt.IsFloat() {
			b.Where(x, mask, x, kernels.Scalar(0.5))
			b.Where(o.dense(dtype.F32, 4, 5), mask, kernels.Scalar(-1), x)
			continue
		}
		b.Where(x, mask, x, row)
		b.Sum(o.dense(dtype.I64, 1, 5), x)
		b.Sum(o.dense(dtype.I64), x)
	}
	for _, ft := range []dtype.DType{dtype.F32, dtype.F64} {
		big := kernels.Layout{Shape: []int{2, 3}, Strides: []int{1 << 31, 1}}
		x := o.over(ft, big, 1<<32)
		mask := o.over(dtype.Bool, big, 1<<32)
		b.Compare(kernels.Lt, mask, x, kernels.Scalar(1))
		b.Where(x, mask, x, x)
	}
	ints := o.over(dtype.I64, kernels.Layout{Shape: []int{2, 3}, Strides: []int{1 << 31, 1}}, 1<<32)
	b.Where(ints, o.dense(dtype.Bool, 2, 3), ints, kernels.Scalar(7))
	b.Sum(o.dense(dtype.I64, 2, 1), ints)
}

// TestCompareCodesMatch: src/compare.cu's comparison codes are package kernels'
// CompareOp values.
func TestCompareCodesMatch(t *testing.T) {
	src, err := os.ReadFile("src/compare.cu")
	require.NoError(t, err)
	defs := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^#define (CMP_\w+) (\d+)$`).FindAllStringSubmatch(string(src), -1) {
		defs[m[1]] = atoi(t, m[2])
	}
	require.Len(t, defs, int(kernels.Ge))
	for op := kernels.Eq; op.Valid(); op++ {
		assert.Equal(t, int(op), defs["CMP_"+upper(op.String())], "%v", op)
	}
}

// The launches carry what the kernels need: the comparison type (integers as I64), a
// Scalar's exact value (not rounded to float32), the float selection's compute type
// as kernels/cpu picks it; the integer sum zeroes its output first, then walks the
// input with the output broadcast over the reduced dimension.
func TestCompareLaunches(t *testing.T) {
	b, rec := newRecording(t)
	var o operands
	mask := o.dense(dtype.Bool, 4, 5)

	b.Compare(kernels.Le, mask, o.dense(dtype.F64, 4, 5), kernels.Scalar(0.1))
	b.Compare(kernels.Eq, mask, o.dense(dtype.I64, 4, 5), o.dense(dtype.Bool, 5))
	b.Compare(kernels.Gt, mask, o.dense(dtype.I32, 4, 5), kernels.Scalar(0.5))
	l, _ := rec.take()
	require.Len(t, l, 3)
	for i, want := range []struct {
		op, in int32
		imm    float64
	}{{int32(kernels.Le), int32(dtype.F64), 0.1}, {int32(kernels.Eq), int32(dtype.I64), 0}, {int32(kernels.Gt), int32(dtype.F32), 0.5}} {
		assert.Equal(t, "compare_i32", entries[l[i].k].name)
		assert.Equal(t, uint64(want.op), l[i].args[1].bits, "launch %d: the op", i)
		assert.Equal(t, uint64(want.in), l[i].args[2].bits, "launch %d: the comparison type", i)
		w := walkOf(t, l[i].args[0])
		if want.imm != 0 {
			assert.Equal(t, int32(hdrImm), w.dtype[2])
			assert.Equal(t, want.imm, w.imm[2], "the Scalar's exact value")
		}
	}

	b.Where(o.dense(dtype.F32, 4, 5), mask, o.dense(dtype.F16, 4, 5), kernels.Scalar(0.1))
	b.Where(o.dense(dtype.F32, 4, 5), mask, o.dense(dtype.F64, 4, 5), o.dense(dtype.F32, 5))
	b.Where(o.dense(dtype.I32, 4, 5), mask, o.dense(dtype.I64, 4, 5), kernels.Scalar(-3))
	l, _ = rec.take()
	require.Len(t, l, 3)
	assert.Equal(t, []string{"where_f32_i32", "where_f64_i32", "where_int_i32"}, []string{entries[l[0].k].name, entries[l[1].k].name, entries[l[2].k].name})
	assert.Equal(t, float64(float32(0.1)), walkOf(t, l[0].args[0]).imm[3], "a Scalar read in float32, as kernels/cpu reads it")
	assert.Equal(t, -3.0, walkOf(t, l[2].args[0]).imm[3])

	dst := o.over(dtype.I64, kernels.Layout{Shape: []int{4, 1}, Strides: []int{2, 1}}, 8) // every other element
	b.Sum(dst, o.dense(dtype.Bool, 4, 5))
	l, _ = rec.take()
	require.Len(t, l, 2)
	assert.Equal(t, "fill_i32", entries[l[0].k].name, "the output is zeroed (a memset where it is dense)")
	assert.Equal(t, "sum_int_i32", entries[l[1].k].name)
	w := walkOf(t, l[1].args[0])
	assert.Equal(t, int64(20), w.size, "the walk is over the input")
	assert.Equal(t, uint64(dst.Mem.Ptr), w.base[1])
	assert.Equal(t, [2]int64{2, 0}, [2]int64{w.stride[1][0], w.stride[1][1]}, "the output broadcast over the reduced dimension")
}

// Misuse panics before anything is launched, naming the kernel.
func TestCompareMisuse(t *testing.T) {
	b, rec := newRecording(t)
	var o operands
	x := o.dense(dtype.F32, 4, 5)
	for name, f := range map[string]func(){
		"eq: output must be bool":     func() { b.Compare(kernels.Eq, o.dense(dtype.F32, 4, 5), x, x) },
		"unknown":                     func() { b.Compare(kernels.CompareOp(9), o.dense(dtype.Bool, 4, 5), x, x) },
		"where: an integer operation": func() { b.Where(o.dense(dtype.I64, 4, 5), o.dense(dtype.Bool, 4, 5), x, x) },
		"where: an integer operation on": func() {
			b.Where(o.dense(dtype.I64, 4, 5), o.dense(dtype.Bool, 4, 5), kernels.Scalar(0.5), o.dense(dtype.I64, 4, 5))
		},
		"sum: an integer operation": func() { b.Sum(o.dense(dtype.I64), x) },
		"does not broadcast":        func() { b.Compare(kernels.Lt, o.dense(dtype.Bool, 4, 5), x, o.dense(dtype.F32, 3)) },
	} {
		t.Run(name, func(t *testing.T) { requirePanicNaming(t, name, f) })
	}
	l, _ := rec.take()
	assert.Empty(t, l, "misuse launches nothing")
}

// requirePanicNaming asserts that f panics with a message of this package's that
// contains want.
func requirePanicNaming(t *testing.T, want string, f func()) {
	defer func() {
		r := recover()
		require.NotNil(t, r, "no panic")
		msg := fmt.Sprint(r)
		assert.Contains(t, msg, "kernels/cuda: ")
		assert.Contains(t, msg, want)
	}()
	f()
}
