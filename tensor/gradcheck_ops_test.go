package tensor_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/gradcheck"
)

type in = *tensor.Tensor

// gc is one gradient check of the op named op (a row of tensor.Ops()): f over inputs
// of the given shapes, with values from values (default: uniform in ±[0.2, 1.2], away
// from kinks at 0).
type gc struct {
	name   string
	op     string
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

// runChecks runs every check in F64 (gradcheck's default, with PyTorch's tolerances)
// and in F32, unless the case asks for one type.
func runChecks(t *testing.T, d device.Device, cases []gc) {
	for i, c := range cases {
		types := []dtype.DType{dtype.F64, dtype.F32}
		if c.opts.DType != dtype.Invalid {
			types = types[:0:0]
			types = append(types, c.opts.DType)
		}
		for _, dt := range types {
			t.Run(c.name+"/"+dt.String(), func(t *testing.T) {
				o := c.opts
				o.DType = dt
				require.NoError(t, gradcheck.Check(d, c.f, inputs(c, uint64(i+1)), o))
				requireEmpty(t, d)
			})
		}
	}
}

// TestGradcheckCoversEveryOp makes sure every op of the op table has a gradient check
// (run in F64 and F32 by the tests below), so an op added without one fails here.
func TestGradcheckCoversEveryOp(t *testing.T) {
	d := newCPU(t)
	covered := map[string]bool{}
	for _, c := range allChecks(t, d) {
		_, ok := tensor.LookupOp(c.op)
		require.True(t, ok, "case %s names op %q, which the table does not have", c.name, c.op)
		covered[c.op] = true
	}
	for _, o := range tensor.Ops() {
		switch o.Name {
		case tensor.OpDetach: // it records no node: nothing to check (TestCastDetachAndToGradients)
			continue
		case tensor.OpEq, tensor.OpNe, tensor.OpLt, tensor.OpLe, tensor.OpGt, tensor.OpGe:
			continue // Bool results record no node (TestComparisons)
		}
		require.True(t, covered[o.Name], "op %s has no gradient check", o.Name)
	}
}

// allChecks is every gradient check of the op table, those with labels or indices
// made on d.
func allChecks(t *testing.T, d device.Device) []gc {
	return slices.Concat(elementwiseChecks(), reductionAndViewChecks(), productChecks(), lossAndLayerChecks(d),
		conversionChecks(newSim(t, 64<<20, true)), bceChecks(d), addcChecks(), compareChecks(), linearActivationChecks())
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

func TestGradcheckElementwise(t *testing.T) { runChecks(t, newCPU(t), elementwiseChecks()) }

func elementwiseChecks() []gc {
	un := func(name, op string, f func(x in) in) gc {
		return gc{name: name, op: op, shapes: [][]int{{2, 3}}, f: func(_ *tensor.Scope, x []in) in { return f(x[0]) }}
	}
	bin := func(name, op string, f func(a, b in) in, sa, sb []int) gc {
		return gc{name: name, op: op, shapes: [][]int{sa, sb}, f: func(_ *tensor.Scope, x []in) in { return f(x[0], x[1]) }}
	}
	return []gc{
		un("Neg", tensor.OpNeg, in.Neg), un("Abs", tensor.OpAbs, in.Abs), un("Exp", tensor.OpExp, in.Exp),
		un("Tanh", tensor.OpTanh, in.Tanh), un("Sigmoid", tensor.OpSigmoid, in.Sigmoid), un("Relu", tensor.OpRelu, in.Relu),
		un("Gelu", tensor.OpGelu, in.Gelu), un("GeluTanh", tensor.OpGelu, in.GeluTanh),
		{name: "Log", op: tensor.OpLog, shapes: [][]int{{2, 3}}, values: positive, f: func(_ *tensor.Scope, x []in) in { return x[0].Log() }},
		{name: "Sqrt", op: tensor.OpSqrt, shapes: [][]int{{2, 3}}, values: positive, f: func(_ *tensor.Scope, x []in) in { return x[0].Sqrt() }},
		un("AddScalar", tensor.OpAddScalar, func(x in) in { return x.AddScalar(1.5) }),
		un("MulScalar", tensor.OpMulScalar, func(x in) in { return x.MulScalar(-2.5) }),
		{name: "PowScalar", op: tensor.OpPowScalar, shapes: [][]int{{2, 3}}, values: positive,
			f: func(_ *tensor.Scope, x []in) in { return x[0].PowScalar(2.5) }},
		bin("Add", tensor.OpAdd, in.Add, []int{2, 3}, []int{2, 3}),
		bin("AddBroadcast", tensor.OpAdd, in.Add, []int{2, 1, 3}, []int{4, 1}),
		bin("Sub", tensor.OpSub, in.Sub, []int{3}, []int{2, 3}),
		bin("Mul", tensor.OpMul, in.Mul, []int{2, 3}, []int{2, 1}),
		bin("Div", tensor.OpDiv, in.Div, []int{2, 3}, []int{3}),
		{name: "Pow", op: tensor.OpPow, shapes: [][]int{{2, 3}, {3}}, values: positive, f: func(_ *tensor.Scope, x []in) in { return x[0].Pow(x[1]) }},
		{name: "Maximum", op: tensor.OpMaximum, shapes: [][]int{{2, 3}, {2, 3}}, values: distinct(),
			f: func(_ *tensor.Scope, x []in) in { return x[0].Maximum(x[1]) }},
		{name: "Minimum", op: tensor.OpMinimum, shapes: [][]int{{2, 3}, {1, 3}}, values: distinct(),
			f: func(_ *tensor.Scope, x []in) in { return x[0].Minimum(x[1]) }},
		un("MulSelf", tensor.OpMul, func(x in) in { return x.Mul(x) }),
	}
}

func TestGradcheckReductionsAndViews(t *testing.T) { runChecks(t, newCPU(t), reductionAndViewChecks()) }

func reductionAndViewChecks() []gc {
	one := func(name, op string, shape []int, f func(x in) in) gc {
		return gc{name: name, op: op, shapes: [][]int{shape}, f: func(_ *tensor.Scope, x []in) in { return f(x[0]) }}
	}
	return []gc{
		one("SumAll", tensor.OpSum, []int{2, 3}, func(x in) in { return x.Sum() }),
		one("SumAxes", tensor.OpSum, []int{2, 3, 4}, func(x in) in { return x.Sum(0, 2) }),
		one("SumKeep", tensor.OpSum, []int{2, 3}, func(x in) in { return x.SumKeep(-1) }),
		one("Mean", tensor.OpMean, []int{2, 3, 2}, func(x in) in { return x.Mean(1) }),
		one("MeanKeepAll", tensor.OpMean, []int{2, 3}, func(x in) in { return x.MeanKeep() }),
		one("SumTo", tensor.OpSumTo, []int{2, 3, 4}, func(x in) in { return x.SumTo(3, 1) }),
		one("Norm", tensor.OpNorm, []int{3, 4}, func(x in) in { return x.Norm() }),
		{name: "Max", op: tensor.OpMax, shapes: [][]int{{3, 4}}, values: distinct(), f: func(_ *tensor.Scope, x []in) in { return x[0].Max(1) }},
		{name: "MaxKeep", op: tensor.OpMax, shapes: [][]int{{3, 4}}, values: distinct(), f: func(_ *tensor.Scope, x []in) in { return x[0].MaxKeep(0) }},
		one("Reshape", tensor.OpReshape, []int{2, 3}, func(x in) in { return x.Reshape(3, 2).Exp() }),
		one("ReshapeStrided", tensor.OpReshape, []int{2, 3}, func(x in) in { return x.T().Reshape(-1).Exp() }),
		one("View", tensor.OpView, []int{2, 3}, func(x in) in { return x.View(6).Tanh() }),
		one("Transpose", tensor.OpTranspose, []int{2, 3, 4}, func(x in) in { return x.Transpose(0, 2).Exp() }),
		one("Permute", tensor.OpPermute, []int{2, 3, 4}, func(x in) in { return x.Permute(1, 2, 0).Sigmoid() }),
		one("Slice", tensor.OpSlice, []int{4, 3}, func(x in) in { return x.Slice(0, 1, 3).Exp() }),
		one("Expand", tensor.OpExpand, []int{3, 1}, func(x in) in { return x.Expand(2, 3, 4).Tanh() }),
		one("Squeeze", tensor.OpSqueeze, []int{3, 1}, func(x in) in { return x.Squeeze(1).Exp() }),
		one("Unsqueeze", tensor.OpUnsqueeze, []int{3}, func(x in) in { return x.Unsqueeze(0).Exp() }),
		one("Contiguous", tensor.OpContiguous, []int{2, 3}, func(x in) in { return x.T().Contiguous().Exp() }),
		one("Clone", tensor.OpContiguous, []int{2, 3}, func(x in) in { return x.Clone().Exp() }),
		{name: "Concat", op: tensor.OpConcat, shapes: [][]int{{2, 3}, {2, 1}, {2, 2}}, f: func(_ *tensor.Scope, x []in) in {
			return tensor.Concat(1, x[0], x[1], x[2]).Exp()
		}},
		{name: "Stack", op: tensor.OpStack, shapes: [][]int{{2, 3}, {2, 3}}, f: func(_ *tensor.Scope, x []in) in {
			return tensor.Stack(1, x[0].Tanh(), x[1]).Exp()
		}},
	}
}

func TestGradcheckMatMulAndLinear(t *testing.T) { runChecks(t, newCPU(t), productChecks()) }

func productChecks() []gc {
	mm := func(x []in) in { return x[0].MatMul(x[1]) }
	return []gc{
		{name: "MatMul", op: tensor.OpMatMul, shapes: [][]int{{2, 3}, {3, 4}}, f: func(_ *tensor.Scope, x []in) in { return mm(x) }},
		{name: "MatMulBatchBroadcast", op: tensor.OpMatMul, shapes: [][]int{{2, 1, 2, 3}, {3, 3, 2}}, f: func(_ *tensor.Scope, x []in) in { return mm(x) }},
		{name: "MatMulSharedWeight", op: tensor.OpMatMul, shapes: [][]int{{2, 3, 4}, {4, 2}}, f: func(_ *tensor.Scope, x []in) in { return mm(x) }},
		{name: "MatMulTransposed", op: tensor.OpMatMul, shapes: [][]int{{3, 2}, {4, 3}}, f: func(_ *tensor.Scope, x []in) in { return x[0].T().MatMul(x[1].T()) }},
		{name: "MatMulPermutedBatch", op: tensor.OpMatMul, shapes: [][]int{{2, 3, 2}, {4, 3, 2}}, f: func(_ *tensor.Scope, x []in) in {
			return x[0].Permute(1, 0, 2).MatMul(x[1].Permute(1, 2, 0))
		}},
		{name: "Linear", op: tensor.OpLinear, shapes: [][]int{{4, 3}, {2, 3}, {2}}, f: func(_ *tensor.Scope, x []in) in { return tensor.Linear(x[0], x[1], x[2]) }},
		{name: "LinearNoBias3D", op: tensor.OpLinear, shapes: [][]int{{2, 2, 3}, {4, 3}}, f: func(_ *tensor.Scope, x []in) in { return tensor.Linear(x[0], x[1], nil) }},
		{name: "LinearStridedInput", op: tensor.OpLinear, shapes: [][]int{{3, 4}, {2, 3}}, f: func(_ *tensor.Scope, x []in) in { return tensor.Linear(x[0].T(), x[1], nil) }},
	}
}

func TestGradcheckLinearActivation(t *testing.T) { runChecks(t, newCPU(t), linearActivationChecks()) }

func linearActivationChecks() []gc {
	return []gc{
		{name: "LinearRelu", op: tensor.OpLinearRelu, shapes: [][]int{{4, 3}, {3, 3}, {3}}, f: func(_ *tensor.Scope, x []in) in {
			return tensor.LinearActivation(x[0], x[1], x[2], tensor.ActRelu)
		}},
		{name: "LinearReluNoBias3D", op: tensor.OpLinearRelu, shapes: [][]int{{2, 2, 3}, {4, 3}}, f: func(_ *tensor.Scope, x []in) in {
			return tensor.LinearActivation(x[0], x[1], nil, tensor.ActRelu)
		}},
		{name: "LinearReluStridedInput", op: tensor.OpLinearRelu, shapes: [][]int{{3, 4}, {2, 3}}, f: func(_ *tensor.Scope, x []in) in {
			return tensor.LinearActivation(x[0].T(), x[1], nil, tensor.ActRelu)
		}},
	}
}

func TestGradcheckLossesAndLayers(t *testing.T) {
	d := newCPU(t)
	runChecks(t, d, lossAndLayerChecks(d))
}

func lossAndLayerChecks(d device.Device) []gc {
	return []gc{
		{name: "Softmax", op: tensor.OpSoftmax, shapes: [][]int{{2, 3, 2}}, f: func(_ *tensor.Scope, x []in) in { return x[0].Softmax(1) }},
		{name: "LogSoftmax", op: tensor.OpLogSoftmax, shapes: [][]int{{3, 4}}, f: func(_ *tensor.Scope, x []in) in { return x[0].LogSoftmax(-1) }},
		{name: "CrossEntropy", op: tensor.OpCrossEntropy, shapes: [][]int{{4, 3}}, f: func(s *tensor.Scope, x []in) in {
			return tensor.CrossEntropy(x[0], tensor.FromSlice(s, d, dtype.I64, []int64{2, 0, tensor.IgnoreIndex, 1}))
		}},
		{name: "MSE", op: tensor.OpMSE, shapes: [][]int{{2, 3}, {2, 3}}, f: func(_ *tensor.Scope, x []in) in { return tensor.MSE(x[0], x[1]) }},
		{name: "LayerNorm", op: tensor.OpLayerNorm, shapes: [][]int{{3, 4}, {4}, {4}}, f: func(_ *tensor.Scope, x []in) in {
			return tensor.LayerNorm(x[0], x[1], x[2], 1e-5)
		}},
		{name: "LayerNormNoAffine", op: tensor.OpLayerNorm, shapes: [][]int{{2, 2, 5}}, f: func(_ *tensor.Scope, x []in) in {
			return tensor.LayerNorm(x[0], nil, nil, 1e-5)
		}},
		{name: "Embedding", op: tensor.OpEmbedding, shapes: [][]int{{5, 3}}, f: func(s *tensor.Scope, x []in) in {
			return tensor.Embedding(x[0], tensor.FromSlice(s, d, dtype.I64, []int64{4, 0, 4, 2}, 2, 2))
		}},
		{name: "Dropout", op: tensor.OpDropout, shapes: [][]int{{4, 5}}, f: func(_ *tensor.Scope, x []in) in { return x[0].Dropout(0.4) }},
	}
}

// TestGradcheckConversions checks Cast (through every other floating type) and To.
// The Cast inputs and the perturbation are multiples of 1/128 in [-2, 2], which every
// floating type holds, so the forward is exact; the gradient coming back through a
// 16-bit cast is rounded to it (BF16 keeps 8 bits), hence their tolerance.
func TestGradcheckConversions(t *testing.T) {
	runChecks(t, newCPU(t), conversionChecks(newSim(t, 64<<20, true)))
}

func conversionChecks(other device.Device) []gc {
	dyadic := func(r *rand.Rand) float64 { return float64(r.IntN(256)-128) / 64 }
	var cases []gc
	for _, dt := range []dtype.DType{dtype.F64, dtype.F32, dtype.F16, dtype.BF16} {
		o := gradcheck.Options{Eps: 1.0 / 128}
		if dt == dtype.F16 || dt == dtype.BF16 {
			o.Rtol = 1e-2
		}
		cases = append(cases, gc{name: "Cast" + dt.String(), op: tensor.OpCast, shapes: [][]int{{2, 3}}, values: dyadic, opts: o,
			f: func(_ *tensor.Scope, x []in) in { return x[0].Cast(dt).MulScalar(2).Cast(x[0].DType()) }})
	}
	return append(cases, gc{name: "To", op: tensor.OpTo, shapes: [][]int{{2, 3}}, f: func(_ *tensor.Scope, x []in) in {
		return x[0].To(other).Exp().To(x[0].Device())
	}})
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
