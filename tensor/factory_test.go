package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

func TestFactoriesValuesAndBytes(t *testing.T) {
	for _, td := range dataDevices(t) {
		t.Run(td.Name, func(t *testing.T) {
			d := td.Device
			s := tensor.NewScope()
			z := s.Zeros(d, dtype.F32, 2, 3)
			require.Equal(t, []int{2, 3}, z.Shape())
			require.Equal(t, make([]float32, 6), vals(z))
			o := s.Ones(d, dtype.F16, 4)
			require.Equal(t, []float32{1, 1, 1, 1}, vals(o))
			f := s.Full(d, dtype.BF16, 2.5, 2)
			require.Equal(t, []float32{2.5, 2.5}, vals(f))
			a := s.Arange(d, dtype.I64, 0, 5, 2)
			require.Equal(t, []int64{0, 2, 4}, tensor.ToSlice[int64](a))
			af := s.Arange(d, dtype.F32, 1, 0, -0.25)
			require.Equal(t, []float32{1, 0.75, 0.5, 0.25}, vals(af))
			for _, bad := range [][3]float64{{0, math.Inf(1), 1}, {math.Inf(-1), 0, 1}, {0, 1, math.Inf(1)},
				{0, 1, 0}, {math.NaN(), 1, 1}, {0, 1e30, 1e-30}} {
				requireOpError(t, "Arange", tensor.ErrShape, func() { s.Arange(d, dtype.F32, bad[0], bad[1], bad[2]) })
			}
			none := s.Arange(d, dtype.F32, 0, 1, -1)
			require.Zero(t, none.Numel(), "a step away from end gives nothing")
			none.Release()
			e := s.Empty(d, dtype.I32, 0, 3)
			require.Zero(t, e.Numel())
			require.Equal(t, []int32{}, tensor.ToSlice[int32](e))
			sc := s.Full(d, dtype.F32, 7, []int{}...)
			require.Equal(t, 0, sc.Rank())
			require.Equal(t, 7.0, sc.Item())
			// Requested bytes are exactly the tensors' bytes.
			require.Equal(t, z.Bytes()+o.Bytes()+f.Bytes()+a.Bytes()+af.Bytes()+sc.Bytes(), requested(t, d))
			require.Equal(t, int64(24), z.Bytes())
			require.Equal(t, int64(8), o.Bytes())
			require.Equal(t, 7, s.Len())
			s.Close()
			require.True(t, z.Released())
			requireEmpty(t, d)
		})
	}
}

func TestFromSliceToSliceConversions(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	defer func() { s.Close(); requireEmpty(t, d) }()

	x := tensor.FromSlice(s, d, dtype.F16, []float64{1, 0.1, -2, 65520}, 2, 2)
	require.Equal(t, dtype.F16, x.DType())
	got := tensor.ToSlice[float64](x)
	require.Equal(t, []float64{1, float64(dtype.F16ToF32(dtype.F32ToF16(0.1))), -2, float64(float32(inf()))}, got)

	i := tensor.FromSlice(s, d, dtype.I64, []int{3, -1, 7})
	require.Equal(t, []int{3, -1, 7}, tensor.ToSlice[int](i))
	require.Equal(t, []float32{3, -1, 7}, vals(i))

	b := tensor.FromSlice(s, d, dtype.Bool, []uint8{0, 2, 1})
	require.Equal(t, []uint8{0, 1, 1}, tensor.ToSlice[uint8](b))

	fl := tensor.FromSlice(s, d, dtype.I32, []float32{1.9, -1.9})
	require.Equal(t, []int32{1, -1}, tensor.ToSlice[int32](fl), "floats to integers truncate")

	requireOpError(t, "FromSlice", tensor.ErrShape, func() { f32(s, d, []float32{1, 2, 3}, 2, 2) })
	requireOpError(t, "Item", tensor.ErrShape, func() { x.Item() })
}

func inf() float64 { return 1 / zero() }

func zero() float64 { return 0 }

func TestRandomFactoriesAndGenerator(t *testing.T) {
	d := newCPU(t)
	g := tensor.NewGenerator(42)
	s := tensor.NewScope(tensor.WithGenerator(g))
	defer func() { s.Close(); requireEmpty(t, d) }()

	st := g.State()
	a := vals(s.Randn(d, dtype.F32, 1000))
	b := vals(s.Rand(d, dtype.F32, 1000))
	g.Restore(st)
	require.Equal(t, a, vals(s.Randn(d, dtype.F32, 1000)), "restored state draws the same normals")
	require.Equal(t, b, vals(s.Rand(d, dtype.F32, 1000)))

	mean, sq := 0.0, 0.0
	for _, v := range a {
		mean += float64(v)
		sq += float64(v) * float64(v)
	}
	mean /= 1000
	require.InDelta(t, 0, mean, 0.1)
	require.InDelta(t, 1, sq/1000-mean*mean, 0.15)
	for _, v := range b {
		require.True(t, v >= 0 && v < 1)
	}
	s2 := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(42)))
	require.Equal(t, a, vals(s2.Randn(d, dtype.F32, 1000)), "same seed, same numbers")
	s2.Close()

	requireOpError(t, "Randn", tensor.ErrScope, func() { tensor.NewScope().Randn(d, dtype.F32, 2) })
	requireOpError(t, "Rand", tensor.ErrDType, func() { s.Rand(d, dtype.I64, 2) })
	requireOpError(t, "Generator.Restore", nil, func() { g.Restore(tensor.GeneratorState{}) })
}
