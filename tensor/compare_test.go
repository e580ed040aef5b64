package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// bools reads a Bool tensor as 0s and 1s.
func bools(t *tensor.Tensor) []uint8 { return tensor.ToSlice[uint8](t) }

// Comparisons give Bool tensors, broadcast, compare mixed types as PyTorch does and
// record nothing, on every device with data.
func TestComparisons(t *testing.T) {
	for _, dev := range dataDevices(t) {
		t.Run(dev.Name, func(t *testing.T) {
			d := dev.Device
			s := tensor.NewScope()
			x := tensor.FromSlice(s, d, dtype.F32, []float32{1, 2, 3, float32(math.NaN()), -1, 0}, 2, 3).SetRequiresGrad(true)
			row := tensor.FromSlice(s, d, dtype.F32, []float32{1, 5, 3}, 3)
			for _, c := range []struct {
				name string
				got  *tensor.Tensor
				want []uint8
			}{
				{"Eq", x.Eq(row), []uint8{1, 0, 1, 0, 0, 0}},
				{"Ne", x.Ne(row), []uint8{0, 1, 0, 1, 1, 1}},
				{"Lt", x.Lt(row), []uint8{0, 1, 0, 0, 1, 1}},
				{"Le", x.Le(row), []uint8{1, 1, 1, 0, 1, 1}},
				{"Gt", x.Gt(row), []uint8{0, 0, 0, 0, 0, 0}},
				{"Ge", x.Ge(row), []uint8{1, 0, 1, 0, 0, 0}},
				{"EqScalar", x.EqScalar(2), []uint8{0, 1, 0, 0, 0, 0}},
				{"NeScalar", x.NeScalar(2), []uint8{1, 0, 1, 1, 1, 1}},
				{"LtScalar", x.LtScalar(0), []uint8{0, 0, 0, 0, 1, 0}},
				{"LeScalar", x.LeScalar(0), []uint8{0, 0, 0, 0, 1, 1}},
				{"GtScalar", x.GtScalar(1.5), []uint8{0, 1, 1, 0, 0, 0}},
				{"GeScalar", x.GeScalar(3), []uint8{0, 0, 1, 0, 0, 0}},
			} {
				require.Equal(t, dtype.Bool, c.got.DType(), c.name)
				require.Equal(t, []int{2, 3}, c.got.Shape(), c.name)
				require.False(t, c.got.RequiresGrad(), "%s: a comparison records no gradient", c.name)
				require.Equal(t, c.want, bools(c.got), c.name)
			}
			// Integers exactly, a float64 0.1 as itself, an integer against a fraction in
			// F32, a half tensor against the Scalar rounded to it.
			big := tensor.FromSlice(s, d, dtype.I64, []int64{1<<53 + 1, 2})
			require.Equal(t, []uint8{0, 1}, bools(big.Eq(tensor.FromSlice(s, d, dtype.I64, []int64{1 << 53, 2}))))
			require.Equal(t, []uint8{1, 1}, bools(big.GtScalar(1.5)))
			require.Equal(t, []uint8{1}, bools(tensor.FromSlice(s, d, dtype.F64, []float64{0.1}).EqScalar(0.1)))
			require.Equal(t, []uint8{1}, bools(tensor.FromSlice(s, d, dtype.F64, []float64{0.1}).Cast(dtype.F16).EqScalar(0.1)))
			require.Equal(t, []uint8{0, 1}, bools(tensor.FromSlice(s, d, dtype.I32, []int32{3, 4}).Eq(tensor.FromSlice(s, d, dtype.F16, []float32{2, 4}))))
			s.Close()
			requireEmpty(t, d)
		})
	}
}

// The accuracy of a classifier in one line, and the count of right answers as an
// exact I64.
func TestAccuracyOfPredictions(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	logits := tensor.FromSlice(s, d, dtype.F32, []float32{
		0.1, 0.7, 0.2,
		0.9, 0.05, 0.05,
		0.2, 0.3, 0.5,
		0.6, 0.3, 0.1,
	}, 4, 3)
	labels := tensor.FromSlice(s, d, dtype.I64, []int64{1, 0, 1, 0})
	pred := logits.Argmax(1)
	right := pred.Eq(labels)
	require.Equal(t, []uint8{1, 1, 0, 1}, bools(right))
	count := right.Sum()
	require.Equal(t, dtype.I64, count.DType())
	require.Equal(t, 3.0, count.Item())
	acc := right.Mean()
	require.Equal(t, dtype.F32, acc.DType())
	require.Equal(t, 0.75, acc.Item())
	perRow := right.Reshape(2, 2).Sum(1)
	require.Equal(t, []int64{2, 1}, tensor.ToSlice[int64](perRow))
	tensortest.RequireLive(t, d, "the data, the predictions, the Bool results and the sums",
		tensortest.Sizes(logits, labels, pred, right, count, acc, perRow)...)
	s.Close()
	requireEmpty(t, d)
}

// Where and MaskedFill select values and route the gradient by the condition.
func TestWhereAndMaskedFill(t *testing.T) {
	for _, dev := range dataDevices(t) {
		t.Run(dev.Name, func(t *testing.T) {
			d := dev.Device
			s := tensor.NewScope()
			a := tensor.FromSlice(s, d, dtype.F32, []float32{1, 2, 3, 4, 5, 6}, 2, 3).SetRequiresGrad(true)
			b := tensor.FromSlice(s, d, dtype.F32, []float32{-1, -2, -3}, 3).SetRequiresGrad(true)
			cond := a.GtScalar(2.5)
			y := tensor.Where(cond, a, b)
			require.Equal(t, []float32{-1, -2, 3, 4, 5, 6}, f32s(y))
			y.Sum().Backward()
			require.Equal(t, []float32{0, 0, 1, 1, 1, 1}, f32s(a.Grad()))
			require.Equal(t, []float32{1, 1, 0}, f32s(b.Grad()), "b's gradient summed over the broadcast rows")

			filled := a.MaskedFill(tensor.FromSlice(s, d, dtype.Bool, []uint8{1, 0, 1}, 3), -10)
			require.Equal(t, []float32{-10, 2, -10, -10, 5, -10}, f32s(filled))
			a.ZeroGrad(true)
			filled.Sum().Backward()
			require.Equal(t, []float32{0, 1, 0, 0, 1, 0}, f32s(a.Grad()))

			ints := tensor.FromSlice(s, d, dtype.I64, []int64{7, 1<<53 + 1})
			require.Equal(t, []int64{7, -3}, tensor.ToSlice[int64](ints.MaskedFill(ints.GtScalar(7), -3)))
			mixed := tensor.Where(ints.LtScalar(8), ints, tensor.FromSlice(s, d, dtype.F32, []float32{0.5, 0.5}))
			require.Equal(t, dtype.F32, mixed.DType(), "an I64 with an F32 promotes to F32")
			require.Equal(t, []float32{7, 0.5}, f32s(mixed))
			a.ZeroGrad(true)
			b.ZeroGrad(true)
			s.Close()
			a.Release()
			b.Release()
			requireEmpty(t, d)
		})
	}
}

func f32s(t *tensor.Tensor) []float32 { return tensor.ToSlice[float32](t) }

func compareChecks() []gc {
	return []gc{
		{name: "Where", op: tensor.OpWhere, shapes: [][]int{{3, 4}, {4}},
			f: func(_ *tensor.Scope, x []in) in { return tensor.Where(x[0].Gt(x[1]), x[0].Mul(x[1]), x[1]) }},
		{name: "MaskedFill", op: tensor.OpMaskedFill, shapes: [][]int{{3, 4}, {4}},
			f: func(_ *tensor.Scope, x []in) in { return x[0].MaskedFill(x[1].LtScalar(0), 2.5) }},
	}
}

func TestGradcheckWhere(t *testing.T) { runChecks(t, newCPU(t), compareChecks()) }

// Bad input is an error naming the op and what to do.
func TestCompareErrors(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := tensor.FromSlice(s, d, dtype.F32, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	requireOpError(t, tensor.OpEq, tensor.ErrShape, func() { x.Eq(tensor.FromSlice(s, d, dtype.F32, []float32{1, 2}, 2)) })
	e := requireOpError(t, tensor.OpWhere, tensor.ErrDType, func() { tensor.Where(x, x, x) })
	require.Contains(t, e.Error(), "it must be Bool")
	requireOpError(t, tensor.OpMaskedFill, tensor.ErrShape, func() { x.MaskedFill(tensor.FromSlice(s, d, dtype.Bool, []uint8{1, 0}, 2), 1) })
	ints := tensor.FromSlice(s, d, dtype.I32, []int32{1, 2})
	e = requireOpError(t, tensor.OpMaskedFill, tensor.ErrDType, func() { ints.MaskedFill(ints.EqScalar(1), 0.5) })
	require.Contains(t, e.Error(), "the constant 0.5 is not a value of int32")
	s.Close()
	requireEmpty(t, d)
}

// On the meta device comparisons, selections and their reductions allocate what a
// GPU would (a byte per Bool element, 8 bytes for an I64 sum) and compute nothing.
func TestCompareOnMeta(t *testing.T) {
	d := tensortest.Meta(t)
	s := tensor.NewScope()
	x := s.Zeros(d, dtype.F32, 1024, 1000)
	labels := s.Zeros(d, dtype.I64, 1024)
	pred := x.Argmax(1)
	right := pred.Eq(labels)
	count, acc := right.Sum(), right.Mean()
	mask := x.GtScalar(0)
	filled := x.MaskedFill(mask, 0)
	tensortest.RequireLive(t, d, "after the comparisons", tensortest.Sizes(x, labels, pred, right, count, acc, mask, filled)...)
	require.Equal(t, int64(1024), right.Bytes())
	require.Equal(t, int64(8), count.Bytes())
	requireOpError(t, "Item", tensor.ErrNoData, func() { acc.Item() })
	s.Close()
	requireEmpty(t, d)
}
