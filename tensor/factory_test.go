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

	// Values a type holds go in and out unchanged, whatever the Go type.
	x := tensor.FromSlice(s, d, dtype.F16, []float64{1, 0.5, -2, 65504}, 2, 2)
	require.Equal(t, dtype.F16, x.DType())
	require.Equal(t, []float64{1, 0.5, -2, 65504}, tensor.ToSlice[float64](x))
	require.Equal(t, []float32{1, 0.5, -2, 65504}, vals(x))
	require.Equal(t, []int{1, 0, -2, 65504}[0], tensor.ToSlice[int](x.Slice(1, 0, 1))[0])

	f := tensor.FromSlice(s, d, dtype.F64, []float64{0.1, 1e300, math.Inf(-1)})
	require.Equal(t, []float64{0.1, 1e300, math.Inf(-1)}, tensor.ToSlice[float64](f), "float64 data in F64 is kept exactly")
	nan := tensor.FromSlice(s, d, dtype.F32, []float64{math.NaN()})
	require.True(t, math.IsNaN(nan.Item()), "NaN is a value of every float type")

	i := tensor.FromSlice(s, d, dtype.I64, []int{3, -1, 7})
	require.Equal(t, []int{3, -1, 7}, tensor.ToSlice[int](i))
	require.Equal(t, []float32{3, -1, 7}, vals(i))
	require.Equal(t, []uint8{3}, tensor.ToSlice[uint8](i.Slice(0, 0, 1)))
	big := tensor.FromSlice(s, d, dtype.I64, []int64{1<<53 + 1, 1 << 62})
	require.Equal(t, []int64{1<<53 + 1, 1 << 62}, tensor.ToSlice[int64](big))
	require.Equal(t, float64(1<<62), big.Slice(0, 1, 2).Item(), "2^62 is a float64")

	b := tensor.FromSlice(s, d, dtype.Bool, []uint8{0, 1, 1})
	require.Equal(t, []uint8{0, 1, 1}, tensor.ToSlice[uint8](b))
	require.Equal(t, []float64{0, 1, 1}, tensor.ToSlice[float64](b))

	fl := tensor.FromSlice(s, d, dtype.I32, []float32{1, -2, 3e9 / 2})
	require.Equal(t, []int32{1, -2, 1500000000}, tensor.ToSlice[int32](fl), "integral floats are integers")

	// Values a type does not hold are refused, naming them: nothing rounds,
	// truncates, saturates or wraps silently.
	for _, c := range []struct {
		name string
		f    func()
		want string
	}{
		{"float64 0.1 into F32", func() { tensor.FromSlice(s, d, dtype.F32, []float64{1, 0.1}) }, "value 0.1 at 1 has no exact float32"},
		{"into F16", func() { tensor.FromSlice(s, d, dtype.F16, []float32{65520}) }, "has no exact float16"},
		{"into BF16", func() { tensor.FromSlice(s, d, dtype.BF16, []float64{1 + 1.0/256}) }, "has no exact bfloat16"},
		{"1.9 into I32", func() { tensor.FromSlice(s, d, dtype.I32, []float32{1.9}) }, "value 1.9 at 0 has no exact int32"},
		{"3e9 into I32", func() { tensor.FromSlice(s, d, dtype.I32, []int64{3e9}) }, "integers in int32's range"},
		{"NaN into I64", func() { tensor.FromSlice(s, d, dtype.I64, []float64{math.NaN()}) }, "has no exact int64"},
		{"2 into Bool", func() { tensor.FromSlice(s, d, dtype.Bool, []int{2}) }, "has no exact bool"},
		{"2^24+1 into F32", func() { tensor.FromSlice(s, d, dtype.F32, []int{1<<24 + 1}) }, "has no exact float32"},
		{"2^53+1 into F64", func() { tensor.FromSlice(s, d, dtype.F64, []int64{1<<53 + 1}) }, "has no exact float64"},
	} {
		te := requireOpError(t, "FromSlice", tensor.ErrDType, c.f)
		require.Contains(t, te.Error(), c.want, c.name)
	}
	for _, c := range []struct {
		name string
		op   string
		f    func()
		want string
	}{
		{"F64 0.1 as float32", "ToSlice", func() { tensor.ToSlice[float32](f) }, "element 0 (0.1) has no exact float32"},
		{"F64 1e300 as float32", "ToSlice", func() { tensor.ToSlice[float32](f.Slice(0, 1, 2)) }, "has no exact float32"},
		{"F16 0.5 as int", "ToSlice", func() { tensor.ToSlice[int](x) }, "element 1 (0.5) has no exact int"},
		{"-Inf as int64", "ToSlice", func() { tensor.ToSlice[int64](f.Slice(0, 2, 3)) }, "has no exact int64"},
		{"-1 as uint8", "ToSlice", func() { tensor.ToSlice[uint8](i) }, "element 1 (-1) has no exact uint8"},
		{"2^53+1 as float64", "ToSlice", func() { tensor.ToSlice[float64](big) }, "element 0 (9007199254740993) has no exact float64"},
		{"2^53+1 as Item", "Item", func() { big.Slice(0, 0, 1).Item() }, "has no exact float64"},
	} {
		te := requireOpError(t, c.op, tensor.ErrDType, c.f)
		require.Contains(t, te.Error(), c.want, c.name)
	}

	requireOpError(t, "FromSlice", tensor.ErrShape, func() { f32(s, d, []float32{1, 2, 3}, 2, 2) })
	requireOpError(t, "Item", tensor.ErrShape, func() { x.Item() })
}

// Constants (Full, Fill, the scalars of ops) round to nearest in the type they are
// used in, as a Go constant does, but never overflow, and are exact for integers.
func TestConstantsRoundButDoNotOverflow(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	defer func() { s.Close(); requireEmpty(t, d) }()

	require.Equal(t, []float32{float32(0.1)}, vals(s.Full(d, dtype.F32, 0.1, 1)), "0.1 rounds to float32")
	require.Equal(t, []float64{0.1}, tensor.ToSlice[float64](s.Full(d, dtype.F64, 0.1, 1)))
	h := s.Full(d, dtype.F16, 1+math.Ldexp(1, -11)+1e-9, 1)
	require.Equal(t, []float32{1 + 1.0/1024}, vals(h), "just above a tie rounds up: float64 rounds once to F16")
	require.Equal(t, []int64{-3}, tensor.ToSlice[int64](s.Full(d, dtype.I64, -3, 1)))
	x := s.Full(d, dtype.F32, 2, 2)
	x.Fill(0.3)
	require.Equal(t, []float32{0.3, 0.3}, vals(x))
	require.Equal(t, []float32{float32(2) * float32(0.1)}, vals(s.Full(d, dtype.F32, 2, 1).MulScalar(0.1)), "an F32 op computes in float32")
	tenth := 0.1
	require.Equal(t, []float64{2 * tenth}, tensor.ToSlice[float64](s.Full(d, dtype.F64, 2, 1).MulScalar(0.1)), "an F64 op computes in float64")
	require.Equal(t, []float32{float32(math.Inf(1))}, vals(s.Full(d, dtype.F16, 1, 1).MulScalar(1e5)),
		"a 16-bit op computes in float32: 1e5 is a constant there, and the F16 result overflows as results do")

	for _, c := range []struct {
		op   string
		f    func()
		want string
	}{
		{"Full", func() { s.Full(d, dtype.F16, 70000, 1) }, "the constant 70000 overflows float16"},
		{"Full", func() { s.Full(d, dtype.F32, 1e39, 1) }, "overflows float32"},
		{"Full", func() { s.Full(d, dtype.I64, 1.5, 1) }, "the constant 1.5 is not a value of int64"},
		{"Full", func() { s.Full(d, dtype.I32, 3e9, 1) }, "not a value of int32"},
		{"Full", func() { s.Full(d, dtype.Bool, 2, 1) }, "not a value of bool"},
		{"Fill", func() { s.Zeros(d, dtype.I64, 1).Fill(math.NaN()) }, "not a value of int64"},
		{tensor.OpMulScalar, func() { x.MulScalar(1e39) }, "overflows float32"},
		{tensor.OpAddScalar, func() { x.AddScalar(-1e300) }, "overflows float32"},
		{"Scale", func() { x.Scale(1e40) }, "overflows float32"},
		{"AddScaled", func() { x.AddScaled(1e40, x.Detach()) }, "overflows float32"},
		{"Arange", func() { s.Arange(d, dtype.I64, 0, 2, 0.5) }, "the constant 1.5 is not a value of int64"},
		{"Arange", func() { s.Arange(d, dtype.I64, 0, 1.5, 0.5) }, "step 0.5: the values of int64 are integers"},
		{"Arange", func() { s.Arange(d, dtype.F16, 0, 2e5, 1e5) }, "overflows float16"},
	} {
		te := requireOpError(t, c.op, tensor.ErrDType, c.f)
		require.Contains(t, te.Error(), c.want)
	}
	require.Equal(t, []float32{float32(0.3), float32(0.3)}, vals(x), "a refused constant changed nothing")
	require.Equal(t, []float64{0, 0.1, 0.2}, tensor.ToSlice[float64](s.Arange(d, dtype.F64, 0, 0.3, 0.1)), "computed in float64")
	require.Equal(t, []float64{math.Inf(1)}, tensor.ToSlice[float64](s.Full(d, dtype.F16, math.Inf(1), 1)), "Inf is no overflow")
}

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
