package dense_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	gt "gorgonia.org/tensor"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/dense"
	"github.com/subletml/sublet/tensor/tensortest"
)

func TestRoundTrips(t *testing.T) {
	d, err := cpu.New(cpu.Options{Capacity: 1 << 28})
	require.NoError(t, err)
	s := tensor.NewScope()

	// gorgonia's package initializes on this Go (assume-no-moving-gc is pinned).
	g := gt.New(gt.WithShape(2, 3), gt.WithBacking([]float32{1, 2, 3, 4, 5, 6}))
	x := dense.From(s, d, g)
	require.Equal(t, []int{2, 3}, x.Shape())
	require.Equal(t, dtype.F32, x.DType())
	require.Equal(t, []float32{1, 2, 3, 4, 5, 6}, tensor.ToSlice[float32](x))

	back := dense.To(x.T())
	require.Equal(t, gt.Shape{3, 2}, back.Shape())
	require.Equal(t, []float32{1, 4, 2, 5, 3, 6}, back.Data())

	h := dense.To(x.Cast(dtype.BF16))
	require.Equal(t, gt.Float32, h.Dtype())
	require.Equal(t, []float32{1, 2, 3, 4, 5, 6}, h.Data())

	f64 := dense.From(s, d, gt.New(gt.WithShape(3), gt.WithBacking([]float64{0.1, -1, 1e-300})))
	require.Equal(t, dtype.F64, f64.DType(), "Float64 stays float64")
	require.Equal(t, []float64{0.1, -1, 1e-300}, tensor.ToSlice[float64](f64))
	f64back := dense.To(f64.Exp())
	require.Equal(t, gt.Float64, f64back.Dtype())
	require.Equal(t, []float64{math.Exp(0.1), math.Exp(-1), 1}, f64back.Data(), "computed in float64 both ways")

	ints := dense.From(s, d, gt.New(gt.WithShape(2, 2), gt.WithBacking([]int{1, -2, 3, 4})))
	require.Equal(t, dtype.I64, ints.DType())
	require.Equal(t, []int64{1, -2, 3, 4}, dense.To(ints).Data())

	bools := dense.From(s, d, gt.New(gt.WithShape(3), gt.WithBacking([]bool{true, false, true})))
	require.Equal(t, []bool{true, false, true}, dense.To(bools).Data())

	i32 := dense.To(tensor.FromSlice(s, d, dtype.I32, []int32{7, 8}))
	require.Equal(t, []int32{7, 8}, i32.Data())

	sc := dense.From(s, d, gt.New(gt.FromScalar(float32(2.5))))
	require.Equal(t, 0, sc.Rank())
	require.Equal(t, 2.5, sc.Item())
	require.Equal(t, float32(2.5), dense.To(sc).Data())

	// Views are read in logical order.
	big := gt.New(gt.WithShape(3, 4), gt.WithBacking(gt.Range(gt.Float32, 0, 12)))
	view, err := big.Slice(gt.S(1, 3), gt.S(1, 3))
	require.NoError(t, err)
	require.Equal(t, []float32{5, 6, 9, 10}, tensor.ToSlice[float32](dense.From(s, d, view.(*gt.Dense))))
	tr := gt.New(gt.WithShape(2, 3), gt.WithBacking([]float32{1, 2, 3, 4, 5, 6}))
	require.NoError(t, tr.T())
	ft := dense.From(s, d, tr)
	require.Equal(t, []int{3, 2}, ft.Shape())
	require.Equal(t, []float32{1, 4, 2, 5, 3, 6}, tensor.ToSlice[float32](ft))

	err = tensor.Try(func() { dense.From(s, d, gt.New(gt.WithShape(2), gt.WithBacking([]uint8{1, 2}))) })
	require.ErrorIs(t, err, tensor.ErrDType)

	s.Close()
	a, err := alloc.For(d)
	require.NoError(t, err)
	require.Zero(t, a.Stats().AllocatedBytes[alloc.StatAll].Current)
	tensortest.RequireEmpty(t, d)
}

// Every element type round-trips, as an array and as a scalar (rank 0), and nothing is
// left allocated.
func TestEveryTypeAndScalars(t *testing.T) {
	d := tensortest.CPU(t)
	s := tensor.NewScope()
	for _, c := range []struct {
		backing any
		scalar  any
		dt      dtype.DType
		back    gt.Dtype
	}{
		{[]float32{1.5, -2}, float32(1.5), dtype.F32, gt.Float32},
		{[]float64{1.5, -2}, float64(1.5), dtype.F64, gt.Float64},
		{[]int32{7, -8}, int32(7), dtype.I32, gt.Int32},
		{[]int64{7, -8}, int64(7), dtype.I64, gt.Int64},
		{[]int{7, -8}, 7, dtype.I64, gt.Int64},
		{[]bool{true, false}, true, dtype.Bool, gt.Bool},
	} {
		x := dense.From(s, d, gt.New(gt.WithShape(2), gt.WithBacking(c.backing)))
		require.Equal(t, c.dt, x.DType(), "%T", c.backing)
		require.Equal(t, []int{2}, x.Shape())
		back := dense.To(x)
		require.Equal(t, c.back, back.Dtype(), "%T", c.backing)
		require.Equal(t, gt.Shape{2}, back.Shape())

		sc := dense.From(s, d, gt.New(gt.FromScalar(c.scalar)))
		require.Equal(t, 0, sc.Rank(), "%T", c.scalar)
		require.Equal(t, c.dt, sc.DType())
		sb := dense.To(sc)
		require.True(t, sb.IsScalar())
		require.Equal(t, c.back, sb.Dtype())
		require.EqualValues(t, tensor.ToSlice[float64](x)[0], tensor.ToSlice[float64](sc)[0])
	}
	require.Equal(t, []int64{7, -8}, dense.To(tensor.FromSlice(s, d, dtype.I64, []int{7, -8})).Data())
	require.Equal(t, []float32{0.5, 2}, dense.To(tensor.FromSlice(s, d, dtype.F16, []float32{0.5, 2})).Data())
	empty := dense.From(s, d, gt.New(gt.WithShape(2, 0), gt.WithBacking([]float32{})))
	require.Equal(t, []int{2, 0}, empty.Shape())
	require.Equal(t, dtype.F32, empty.DType())
	require.Equal(t, gt.Shape{2, 0}, dense.To(empty).Shape())

	meta := tensortest.Meta(t)
	err := tensor.Try(func() { dense.To(s.Zeros(meta, dtype.F32, 2)) })
	require.ErrorIs(t, err, tensor.ErrNoData)
	s.Close()
	tensortest.RequireEmpty(t, d)
	tensortest.RequireEmpty(t, meta)
}
