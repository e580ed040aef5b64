package tensor_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// String prints values as PyTorch does (same number formats, alignment, nesting,
// wrapping at 80 columns and summaries past 1000 elements), then the metadata.
func TestStringShowsValuesAsPyTorch(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	ar := func(dt dtype.DType, n int) *tensor.Tensor { return s.Arange(d, dt, 0, float64(n), 1) }
	for _, c := range []struct {
		x    *tensor.Tensor
		want string
	}{
		{f32(s, d, []float32{1.5, -2, 3, 40}, 2, 2), "Tensor([[ 1.5000, -2.0000],\n" +
			"        [ 3.0000, 40.0000]], shape=[2 2], dtype=float32, device=cpu)"},
		{s.Full(d, dtype.F32, 3.25), "Tensor(3.2500, shape=[], dtype=float32, device=cpu)"},
		{ar(dtype.F32, 3).MulScalar(1e-5), "Tensor([0.0000e+00, 1.0000e-05, 2.0000e-05], shape=[3], dtype=float32, device=cpu)"},
		{f32(s, d, []float32{1, float32(math.Inf(-1)), float32(math.NaN())}, 3), "Tensor([1., -inf, nan], shape=[3], dtype=float32, device=cpu)"},
		{ar(dtype.I64, 3).Reshape(1, 3), "Tensor([[0, 1, 2]], shape=[1 3], dtype=int64, device=cpu)"},
		{s.Ones(d, dtype.Bool, 2), "Tensor([true, true], shape=[2], dtype=bool, device=cpu)"},
		{tensor.FromSlice(s, d, dtype.I64, []int64{1<<53 + 1, -(1<<62 + 3)}), // no value through float64
			"Tensor([    9007199254740993, -4611686018427387907], shape=[2], dtype=int64, device=cpu)"},
		{s.Zeros(d, dtype.F32, 0, 3), "Tensor([], shape=[0 3], dtype=float32, device=cpu)"},
		{f32(s, d, []float32{0, 100}, 2), "Tensor([  0., 100.], shape=[2], dtype=float32, device=cpu)"},
		{ar(dtype.F32, 10000), "Tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 9.9970e+03, 9.9980e+03,\n" +
			"        9.9990e+03], shape=[10000], dtype=float32, device=cpu)"},
		{ar(dtype.I64, 2000).Reshape(40, 50).T(), "Tensor([[   0,   50,  100,  ..., 1850, 1900, 1950],\n" +
			"        [   1,   51,  101,  ..., 1851, 1901, 1951],\n" +
			"        [   2,   52,  102,  ..., 1852, 1902, 1952],\n" +
			"        ...,\n" +
			"        [  47,   97,  147,  ..., 1897, 1947, 1997],\n" +
			"        [  48,   98,  148,  ..., 1898, 1948, 1998],\n" +
			"        [  49,   99,  149,  ..., 1899, 1949, 1999]], shape=[50 40], dtype=int64, device=cpu)"},
		{ar(dtype.F32, 20).MulScalar(0.5), "Tensor([0.0000, 0.5000, 1.0000, 1.5000, 2.0000, 2.5000, 3.0000, 3.5000, 4.0000,\n" +
			"        4.5000, 5.0000, 5.5000, 6.0000, 6.5000, 7.0000, 7.5000, 8.0000, 8.5000,\n" +
			"        9.0000, 9.5000], shape=[20], dtype=float32, device=cpu)"},
	} {
		require.Equal(t, c.want, c.x.String())
	}
	require.Equal(t, "Tensor([[0., 1.],\n        [2., 3.]], shape=[2 2], dtype=float32, device=cpu)",
		fmt.Sprint(ar(dtype.F32, 4).Reshape(2, 2)), "fmt prints through String")
	s.Close()
	requireEmpty(t, d)
}

// Values come from wherever the tensor lives: a GPU's are downloaded (only the items
// shown, for a summary); a device that keeps no data, or a released handle, prints
// the metadata alone.
func TestStringReadsEveryDevice(t *testing.T) {
	gpu, meta := tensortest.NewRemote(t, "cuda:0"), newSim(t, 0, false)
	s := tensor.NewScope()
	g := tensor.FromSlice(s, gpu, dtype.F16, []float32{1, 2, 3, 4, 5, 6}, 2, 3).T()
	require.Equal(t, "Tensor([[1., 4.],\n        [2., 5.],\n        [3., 6.]], shape=[3 2], dtype=float16, device=cuda:0)", g.String())
	big := tensor.FromSlice(s, gpu, dtype.I32, make([]int32, 4000), 2, 2000)
	require.Equal(t, "Tensor([[0, 0, 0,  ..., 0, 0, 0],\n        [0, 0, 0,  ..., 0, 0, 0]], shape=[2 2000], dtype=int32, device=cuda:0)", big.String())
	m := s.Zeros(meta, dtype.F32, 2, 3).SetRequiresGrad(true)
	require.Equal(t, "Tensor(shape=[2 3], dtype=float32, device=sim, requires_grad)", m.String())
	s.Close()
}
