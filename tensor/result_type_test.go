package tensor_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/gradcheck"
)

// typedOp is an op that takes its result's type, in its plain form and its explicit
// form, over the last axis.
type typedOp struct {
	name  string
	op    string // the op name an autocast policy sees
	plain func(x *tensor.Tensor) *tensor.Tensor
	as    func(x *tensor.Tensor, dt dtype.DType) *tensor.Tensor
}

// f is the plain form for dt Invalid, the explicit one otherwise.
func (o typedOp) f(x *tensor.Tensor, dt dtype.DType) *tensor.Tensor {
	if dt == dtype.Invalid {
		return o.plain(x)
	}
	return o.as(x, dt)
}

var typedOps = []typedOp{
	{"Sum", tensor.OpSum, func(x in) in { return x.Sum(-1) }, func(x in, dt dtype.DType) in { return x.SumAs(dt, -1) }},
	{"SumKeep", tensor.OpSum, func(x in) in { return x.SumKeep(-1) }, func(x in, dt dtype.DType) in { return x.SumKeepAs(dt, -1) }},
	{"Softmax", tensor.OpSoftmax, func(x in) in { return x.Softmax(-1) }, func(x in, dt dtype.DType) in { return x.SoftmaxAs(dt, -1) }},
	{"LogSoftmax", tensor.OpLogSoftmax, func(x in) in { return x.LogSoftmax(-1) },
		func(x in, dt dtype.DType) in { return x.LogSoftmaxAs(dt, -1) }},
}

// sixtyFourths returns n values k/64 in [-2, 2): exact in F16 and BF16, and so are
// their neighbours ±1/64, the gradient checks' perturbation.
func sixtyFourths(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 9))
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.IntN(256)-128) / 64
	}
	return v
}

// An F16 or BF16 input gives an F32 result equal to the op on the same values in F32,
// and its gradient comes back in the input's type: the F32 gradient rounded once.
func TestResultTypeF32FromHalfMatchesF32(t *testing.T) {
	for _, td := range dataDevices(t) {
		d := td.Device
		for _, op := range typedOps {
			for _, half := range []dtype.DType{dtype.F16, dtype.BF16} {
				t.Run(td.Name+"/"+op.name+"/"+half.String(), func(t *testing.T) {
					data, w := sixtyFourths(3*5, 1), sixtyFourths(3*5, 2)
					s := tensor.NewScope()

					x32 := f32(s, d, data, 3, 5).SetRequiresGrad(true)
					want := op.f(x32, dtype.Invalid)
					want.Mul(f32(s, d, w[:want.Numel()], want.Shape()...)).Sum().Backward()
					wantGrad := vals(s.Bind(x32.Grad()).Cast(half))

					x := f32(s, d, data, 3, 5).Cast(half).Detach().SetRequiresGrad(true)
					y := op.f(x, dtype.F32)
					require.Equal(t, dtype.F32, y.DType())
					require.Equal(t, want.Shape(), y.Shape())
					require.Equal(t, vals(want), vals(y), "the same values, read from %v", half)
					y.Mul(f32(s, d, w[:y.Numel()], y.Shape()...)).Sum().Backward()
					require.Equal(t, half, x.Grad().DType(), "the gradient comes back in the input's type")
					require.Equal(t, wantGrad, vals(x.Grad()))

					s.Close()
					requireEmpty(t, d)
				})
			}
		}
	}
}

// A result type that does not hold the input exactly casts the input first (PyTorch's
// dtype=): SumAs(F16) of F32 is Cast(F16).Sum(), and the gradient is F32.
func TestResultTypeNarrowerCastsFirst(t *testing.T) {
	d := newCPU(t)
	r := rand.New(rand.NewPCG(3, 4))
	data := make([]float32, 4*6)
	for i := range data {
		data[i] = float32(r.NormFloat64())
	}
	for _, op := range typedOps {
		for _, pair := range [][2]dtype.DType{{dtype.F32, dtype.F16}, {dtype.F32, dtype.BF16}, {dtype.F16, dtype.BF16}} {
			from, to := pair[0], pair[1]
			t.Run(op.name+"/"+from.String()+"->"+to.String(), func(t *testing.T) {
				s := tensor.NewScope()
				x := f32(s, d, data, 4, 6).Cast(from).Detach().SetRequiresGrad(true)
				want := op.f(x.Detach().Cast(to), dtype.Invalid)
				y := op.f(x, to)
				require.Equal(t, to, y.DType())
				require.Equal(t, vals(want), vals(y))
				y.Sum().Backward()
				require.Equal(t, from, x.Grad().DType())
				s.Close()
				requireEmpty(t, d)
			})
		}
	}
}

// The gradients of the typed forms, through a 16-bit input, agree with finite
// differences (inputs and perturbations exact in 16 bits, so the difference quotient
// sees no rounding of the input).
func TestResultTypeGradients(t *testing.T) {
	d := newCPU(t)
	for _, op := range typedOps {
		for _, half := range []dtype.DType{dtype.F16, dtype.BF16} {
			t.Run(op.name+"/"+half.String(), func(t *testing.T) {
				data := sixtyFourths(3*4, 5)
				f := func(_ *tensor.Scope, in []*tensor.Tensor) *tensor.Tensor {
					return op.f(in[0].Cast(half), dtype.F32)
				}
				x := gradcheck.Input{Shape: []int{3, 4}}
				for _, v := range data {
					x.Data = append(x.Data, float64(v))
				}
				// BF16 holds 8 significant bits: the gradient, rounded to it on its
				// way back, is good to 2⁻⁸ relative.
				o := gradcheck.Options{Eps: 1.0 / 64, Rtol: 2e-2, Atol: 4e-3}
				require.NoError(t, gradcheck.Check(d, f, []gradcheck.Input{x}, o))
				requireEmpty(t, d)
			})
		}
	}
}

// outputPolicy is a toy autocast policy in PyTorch's shape: products in F16
// (halfProducts), the reductions with a result type in F32 through AutocastOutput. It
// records what it was asked.
type outputPolicy struct {
	halfProducts
	outputs []string
	out     dtype.DType // what OutputType answers (F32 by default)
}

func (p *outputPolicy) OutputType(op string, in []*tensor.Tensor) (dtype.DType, bool) {
	p.outputs = append(p.outputs, op)
	if op != tensor.OpSum && op != tensor.OpSoftmax && op != tensor.OpLogSoftmax && op != tensor.OpSumTo {
		return dtype.Invalid, false
	}
	if !in[0].DType().IsFloat() {
		return dtype.Invalid, false
	}
	if p.out != dtype.Invalid {
		return p.out, true
	}
	return dtype.F32, true
}

// Under a policy with AutocastOutput, the plain forms take the type it picks and the
// policy's Inputs is not asked for them; the explicit forms ask neither; the ops without
// a result type ask only Inputs.
func TestAutocastOutputTypePicksResultType(t *testing.T) {
	d := newCPU(t)
	root := tensor.NewScope()
	w := f32(root, d, sixtyFourths(4*4, 7), 4, 4).AsParameter()
	p := &outputPolicy{}
	s := root.Child(tensor.WithAutocast(p))
	x := f32(s, d, sixtyFourths(2*4, 8), 2, 4)

	h := x.MatMul(w)
	require.Equal(t, dtype.F16, h.DType())
	for _, op := range typedOps {
		require.Equal(t, dtype.F32, op.f(h, dtype.Invalid).DType(), op.name)
		require.Equal(t, dtype.F16, op.f(h, dtype.F16).DType(), op.name+" with an explicit type")
	}
	require.Equal(t, dtype.F32, h.SumTo(1, 4).DType())
	require.Equal(t, dtype.F16, h.Mean().DType(), "Mean takes no result type (PyTorch does not list it)")
	require.Equal(t, []string{tensor.OpMatMul, tensor.OpMean}, p.seen)
	require.Equal(t, []string{tensor.OpSum, tensor.OpSum, tensor.OpSoftmax, tensor.OpLogSoftmax, tensor.OpSumTo}, p.outputs)

	p.out = dtype.I64
	requireOpError(t, tensor.OpSoftmax, tensor.ErrDType, func() { h.Softmax(-1) })
	requireOpError(t, tensor.OpSum, tensor.ErrDType, func() { h.SumAs(dtype.I32) })
	s.Close()
	root.Close()
	w.Release()
	requireEmpty(t, d)
}

// The point of the result type: an F32 softmax, log-softmax or sum of an F16 input
// allocates its F32 result and nothing else — no F32 copy of the input, at any moment
// (the allocator's peak), on cpu (which computes) and on meta. The policy-driven form
// saves what the explicit form saves, and the backward brings an F16 gradient.
func TestResultTypeMakesNoCopyOfTheInput(t *testing.T) {
	const rows, cols = 64, 1000
	devs := []struct {
		name string
		dev  device.Device
	}{{"cpu", newCPU(t)}, {"meta", newSim(t, 1<<30, false)}}
	for _, td := range devs {
		d := td.dev
		for _, op := range typedOps {
			for _, viaPolicy := range []bool{false, true} {
				name := td.name + "/" + op.name + "/explicit"
				if viaPolicy {
					name = td.name + "/" + op.name + "/policy"
				}
				t.Run(name, func(t *testing.T) {
					root := tensor.NewScope()
					s := root
					dt := dtype.F32
					if viaPolicy {
						s, dt = root.Child(tensor.WithAutocast(&outputPolicy{})), dtype.Invalid
					}
					x := s.Zeros(d, dtype.F16, rows, cols).SetRequiresGrad(true)
					before := requested(t, d)
					allocator(t, d).ResetPeakStats()

					y := op.f(x, dt)
					require.Equal(t, dtype.F32, y.DType())
					peak := stats(t, d).RequestedBytes[alloc.StatAll].Peak
					require.Equal(t, before+y.Bytes(), peak, "the result is the only allocation")
					require.Equal(t, before+y.Bytes(), requested(t, d), "softmax saves its output; sum nothing")

					y.BackwardWith(tensor.BackwardOptions{Grad: s.Ones(d, dtype.F32, y.Shape()...)})
					require.Equal(t, dtype.F16, x.Grad().DType())
					require.Equal(t, before+2*y.Bytes()+x.Bytes(), requested(t, d), "after backward: y, its seed and x's F16 gradient")
					root.Close()
					requireEmpty(t, d)
				})
			}
		}
	}
}
