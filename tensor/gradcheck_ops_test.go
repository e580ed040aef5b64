package tensor_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/gradcheck"
)

type in = *tensor.Tensor

// gc is one gradient check: f over inputs of the given shapes, with values from
// values (default: uniform in ±[0.2, 1.2], away from kinks at 0).
type gc struct {
	name   string
	shapes [][]int
	f      gradcheck.Func
	values func(r *rand.Rand) float64
	opts   gradcheck.Options
}

func inputs(c gc, seed uint64) []gradcheck.Input {
	r := rand.New(rand.NewPCG(seed, 3))
	vf := c.values
	if vf == nil {
		vf = func(r *rand.Rand) float64 {
			v := 0.2 + r.Float64()
			if r.IntN(2) == 0 {
				v = -v
			}
			return v
		}
	}
	var out []gradcheck.Input
	for _, sh := range c.shapes {
		n := 1
		for _, d := range sh {
			n *= d
		}
		data := make([]float64, n)
		for i := range data {
			data[i] = vf(r)
		}
		out = append(out, gradcheck.Input{Shape: sh, Data: data})
	}
	return out
}

func runChecks(t *testing.T, d device.Device, cases []gc) {
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, gradcheck.Check(d, c.f, inputs(c, uint64(i+1)), c.opts))
			requireEmpty(t, d)
		})
	}
}

func positive(r *rand.Rand) float64 { return 0.3 + r.Float64() }

// distinct gives values far apart, so that maxima have no near ties.
func distinct() func(r *rand.Rand) float64 {
	k := 0
	return func(r *rand.Rand) float64 {
		k++
		return float64((k*7)%23)*0.25 - 2.5
	}
}

func TestGradcheckElementwise(t *testing.T) {
	d := newCPU(t)
	un := func(name string, f func(x in) in) gc {
		return gc{name: name, shapes: [][]int{{2, 3}}, f: func(_ *tensor.Scope, x []in) in { return f(x[0]) }}
	}
	bin := func(name string, f func(a, b in) in, sa, sb []int) gc {
		return gc{name: name, shapes: [][]int{sa, sb}, f: func(_ *tensor.Scope, x []in) in { return f(x[0], x[1]) }}
	}
	cases := []gc{
		un("Neg", in.Neg), un("Abs", in.Abs), un("Exp", in.Exp), un("Tanh", in.Tanh),
		un("Sigmoid", in.Sigmoid), un("Relu", in.Relu), un("Gelu", in.Gelu), un("GeluTanh", in.GeluTanh),
		{name: "Log", shapes: [][]int{{2, 3}}, values: positive, f: func(_ *tensor.Scope, x []in) in { return x[0].Log() }},
		{name: "Sqrt", shapes: [][]int{{2, 3}}, values: positive, f: func(_ *tensor.Scope, x []in) in { return x[0].Sqrt() }},
		un("AddScalar", func(x in) in { return x.AddScalar(1.5) }),
		un("MulScalar", func(x in) in { return x.MulScalar(-2.5) }),
		{name: "PowScalar", shapes: [][]int{{2, 3}}, values: positive, f: func(_ *tensor.Scope, x []in) in { return x[0].PowScalar(2.5) }},
		bin("Add", in.Add, []int{2, 3}, []int{2, 3}),
		bin("AddBroadcast", in.Add, []int{2, 1, 3}, []int{4, 1}),
		bin("Sub", in.Sub, []int{3}, []int{2, 3}),
		bin("Mul", in.Mul, []int{2, 3}, []int{2, 1}),
		bin("Div", in.Div, []int{2, 3}, []int{3}),
		{name: "Pow", shapes: [][]int{{2, 3}, {3}}, values: positive, f: func(_ *tensor.Scope, x []in) in { return x[0].Pow(x[1]) }},
		{name: "Maximum", shapes: [][]int{{2, 3}, {2, 3}}, values: distinct(), f: func(_ *tensor.Scope, x []in) in { return x[0].Maximum(x[1]) }},
		{name: "Minimum", shapes: [][]int{{2, 3}, {1, 3}}, values: distinct(), f: func(_ *tensor.Scope, x []in) in { return x[0].Minimum(x[1]) }},
		un("MulSelf", func(x in) in { return x.Mul(x) }),
	}
	runChecks(t, d, cases)
}

func TestGradcheckReductionsAndViews(t *testing.T) {
	d := newCPU(t)
	one := func(name string, shape []int, f func(x in) in) gc {
		return gc{name: name, shapes: [][]int{shape}, f: func(_ *tensor.Scope, x []in) in { return f(x[0]) }}
	}
	cases := []gc{
		one("SumAll", []int{2, 3}, func(x in) in { return x.Sum() }),
		one("SumAxes", []int{2, 3, 4}, func(x in) in { return x.Sum(0, 2) }),
		one("SumKeep", []int{2, 3}, func(x in) in { return x.SumKeep(-1) }),
		one("Mean", []int{2, 3, 2}, func(x in) in { return x.Mean(1) }),
		one("MeanKeepAll", []int{2, 3}, func(x in) in { return x.MeanKeep() }),
		one("SumTo", []int{2, 3, 4}, func(x in) in { return x.SumTo(3, 1) }),
		{name: "Max", shapes: [][]int{{3, 4}}, values: distinct(), f: func(_ *tensor.Scope, x []in) in { return x[0].Max(1) }},
		{name: "MaxKeep", shapes: [][]int{{3, 4}}, values: distinct(), f: func(_ *tensor.Scope, x []in) in { return x[0].MaxKeep(0) }},
		one("Reshape", []int{2, 3}, func(x in) in { return x.Reshape(3, 2).Exp() }),
		one("ReshapeStrided", []int{2, 3}, func(x in) in { return x.T().Reshape(-1).Exp() }),
		one("View", []int{2, 3}, func(x in) in { return x.View(6).Tanh() }),
		one("Transpose", []int{2, 3, 4}, func(x in) in { return x.Transpose(0, 2).Exp() }),
		one("Permute", []int{2, 3, 4}, func(x in) in { return x.Permute(1, 2, 0).Sigmoid() }),
		one("Slice", []int{4, 3}, func(x in) in { return x.Slice(0, 1, 3).Exp() }),
		one("Expand", []int{3, 1}, func(x in) in { return x.Expand(2, 3, 4).Tanh() }),
		one("Squeeze", []int{3, 1}, func(x in) in { return x.Squeeze(1).Exp() }),
		one("Unsqueeze", []int{3}, func(x in) in { return x.Unsqueeze(0).Exp() }),
		one("Contiguous", []int{2, 3}, func(x in) in { return x.T().Contiguous().Exp() }),
		one("Clone", []int{2, 3}, func(x in) in { return x.Clone().Exp() }),
		{name: "Concat", shapes: [][]int{{2, 3}, {2, 1}, {2, 2}}, f: func(_ *tensor.Scope, x []in) in {
			return tensor.Concat(1, x[0], x[1], x[2]).Exp()
		}},
		{name: "Stack", shapes: [][]int{{2, 3}, {2, 3}}, f: func(_ *tensor.Scope, x []in) in {
			return tensor.Stack(1, x[0].Tanh(), x[1]).Exp()
		}},
	}
	runChecks(t, d, cases)
}

func TestGradcheckMatMulAndLinear(t *testing.T) {
	d := newCPU(t)
	cases := []gc{
		{name: "MatMul", shapes: [][]int{{2, 3}, {3, 4}}, f: func(_ *tensor.Scope, x []in) in { return x[0].MatMul(x[1]) }},
		{name: "MatMulBatchBroadcast", shapes: [][]int{{2, 1, 2, 3}, {3, 3, 2}}, f: func(_ *tensor.Scope, x []in) in { return x[0].MatMul(x[1]) }},
		{name: "MatMulSharedWeight", shapes: [][]int{{2, 3, 4}, {4, 2}}, f: func(_ *tensor.Scope, x []in) in { return x[0].MatMul(x[1]) }},
		{name: "MatMulTransposed", shapes: [][]int{{3, 2}, {4, 3}}, f: func(_ *tensor.Scope, x []in) in { return x[0].T().MatMul(x[1].T()) }},
		{name: "MatMulPermutedBatch", shapes: [][]int{{2, 3, 2}, {4, 3, 2}}, f: func(_ *tensor.Scope, x []in) in {
			return x[0].Permute(1, 0, 2).MatMul(x[1].Permute(1, 2, 0))
		}},
		{name: "Linear", shapes: [][]int{{4, 3}, {2, 3}, {2}}, f: func(_ *tensor.Scope, x []in) in { return tensor.Linear(x[0], x[1], x[2]) }},
		{name: "LinearNoBias3D", shapes: [][]int{{2, 2, 3}, {4, 3}}, f: func(_ *tensor.Scope, x []in) in { return tensor.Linear(x[0], x[1], nil) }},
		{name: "LinearStridedInput", shapes: [][]int{{3, 4}, {2, 3}}, f: func(_ *tensor.Scope, x []in) in { return tensor.Linear(x[0].T(), x[1], nil) }},
	}
	runChecks(t, d, cases)
}

func TestGradcheckLossesAndLayers(t *testing.T) {
	d := newCPU(t)
	cases := []gc{
		{name: "Softmax", shapes: [][]int{{2, 3, 2}}, f: func(_ *tensor.Scope, x []in) in { return x[0].Softmax(1) }},
		{name: "LogSoftmax", shapes: [][]int{{3, 4}}, f: func(_ *tensor.Scope, x []in) in { return x[0].LogSoftmax(-1) }},
		{name: "CrossEntropy", shapes: [][]int{{4, 3}}, f: func(s *tensor.Scope, x []in) in {
			return tensor.CrossEntropy(x[0], tensor.FromSlice(s, d, dtype.I64, []int64{2, 0, tensor.IgnoreIndex, 1}))
		}},
		{name: "MSE", shapes: [][]int{{2, 3}, {2, 3}}, f: func(_ *tensor.Scope, x []in) in { return tensor.MSE(x[0], x[1]) }},
		{name: "LayerNorm", shapes: [][]int{{3, 4}, {4}, {4}}, f: func(_ *tensor.Scope, x []in) in { return tensor.LayerNorm(x[0], x[1], x[2], 1e-5) }},
		{name: "LayerNormNoAffine", shapes: [][]int{{2, 2, 5}}, f: func(_ *tensor.Scope, x []in) in { return tensor.LayerNorm(x[0], nil, nil, 1e-5) }},
		{name: "Embedding", shapes: [][]int{{5, 3}}, f: func(s *tensor.Scope, x []in) in {
			return tensor.Embedding(x[0], tensor.FromSlice(s, d, dtype.I64, []int64{4, 0, 4, 2}, 2, 2))
		}},
		{name: "Dropout", shapes: [][]int{{4, 5}}, f: func(_ *tensor.Scope, x []in) in { return x[0].Dropout(0.4) }},
	}
	runChecks(t, d, cases)
}

func TestCastDetachAndToGradients(t *testing.T) {
	cpuDev, simDev := newCPU(t), newSim(t, 64<<20, true)
	s := tensor.NewScope()
	x := f32(s, cpuDev, []float32{1, -2, 3}).SetRequiresGrad(true)
	h := x.Cast(dtype.F16)
	require.Equal(t, dtype.F16, h.DType())
	y := h.MulScalar(2).Cast(dtype.BF16).To(simDev).Exp().Sum()
	y.Backward()
	require.Equal(t, dtype.F32, x.Grad().DType())
	require.Same(t, cpuDev, x.Grad().Device())
	for i, v := range []float64{1, -2, 3} {
		require.InDelta(t, 2*math.Exp(2*v), tensor.ToSlice[float64](x.Grad())[i], 2*math.Exp(2*v)*0.01)
	}
	z := f32(s, cpuDev, []float32{1, 2}).SetRequiresGrad(true)
	dz := z.Exp().Detach()
	require.False(t, dz.RequiresGrad())
	w := z.Mul(dz).Sum()
	w.Backward()
	require.InDeltaSlice(t, []float64{math.E, math.Exp(2)}, tensor.ToSlice[float64](z.Grad()), 1e-5, "the detached factor is a constant")
	s.Close()
	requireEmpty(t, cpuDev)
	requireEmpty(t, simDev)
}
