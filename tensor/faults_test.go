package tensor_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// failEveryAllocation runs step (which allocates on d) once to count its allocations,
// then once per allocation with that one refused: every attempt must fail with an
// out-of-memory error, and once reset has run the device must hold exactly what it
// held before the attempt.
func failEveryAllocation(t *testing.T, base device.Device, d *tensortest.Flaky, step func(), reset func()) {
	t.Helper()
	before := requested(t, base)
	d.Refuse(0)
	require.NoError(t, tensor.Try(step))
	reset()
	require.Equal(t, before, requested(t, base), "a whole step leaves nothing")
	total := d.Allocs()
	require.Positive(t, total)
	for n := 1; n <= total; n++ {
		d.Refuse(n)
		err := tensor.Try(step)
		reset()
		require.ErrorIs(t, err, device.ErrOutOfMemory, "allocation %d of %d refused", n, total)
		var te *tensor.Error
		require.True(t, errors.As(err, &te), "%v", err)
		require.Equal(t, before, requested(t, base), "allocation %d of %d refused (%v): the device holds more than before the step", n, total, err)
	}
	d.Refuse(0)
}

// A training step over every op family (forward, backward, Adam) that runs out of
// memory at any one of its allocations leaves exactly what it found once its step
// scope closed and the gradients were dropped, on a device that computes and on meta.
func TestEveryAllocationOfATrainingStepMayFail(t *testing.T) {
	for _, name := range []string{"cpu", "sim", "meta"} {
		t.Run(name, func(t *testing.T) {
			var base device.Device
			switch name {
			case "cpu":
				base = newCPU(t)
			case "sim":
				base = newSim(t, 1<<30, true)
			default:
				base = newSim(t, 0, false)
			}
			d := tensortest.NewFlaky(t, base)
			data := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(3)))
			init := data.Child(tensor.NoGrad())
			param := func(scale float64, shape ...int) *tensor.Tensor {
				return init.Randn(d, dtype.F32, shape...).MulScalar(scale).AsParameter()
			}
			w1, b1, w2 := param(0.3, 5, 6), param(0.1, 5), param(0.3, 3, 5)
			lnw, lnb, emb := param(1, 5), param(0.1, 5), param(1, 7, 3)
			params := []*tensor.Tensor{w1, b1, w2, lnw, lnb, emb}
			init.Close()
			x := data.Randn(d, dtype.F32, 4, 6)
			labels := tensor.FromSlice(data, d, dtype.I64, []int64{0, 2, 1, 2}, 4)
			idx := tensor.FromSlice(data, d, dtype.I64, []int64{0, 6, 3, 3, 1, 2}, 2, 3)
			tgt := data.Rand(d, dtype.F32, 4, 3)
			pw := data.Ones(d, dtype.F32, 3)
			var m, v []*tensor.Tensor
			for _, p := range params {
				m = append(m, data.Zeros(d, dtype.F32, p.Shape()...))
				v = append(v, data.Zeros(d, dtype.F32, p.Shape()...))
			}
			step := func() {
				s := data.Child()
				defer s.Close()
				h := tensor.Linear(x, w1, b1)
				h = tensor.LayerNorm(h, lnw, lnb, 1e-5)
				h = h.Gelu().Add(h.Tanh()).Mul(h.Sigmoid()).Sub(h.Relu()).Div(h.Exp().AddScalar(1))
				h = h.Dropout(0.25).Add(h.GeluTanh().Neg())
				y := h.MatMul(s.Bind(w2).T())                                              // [4, 3]
				y = y.Maximum(y.MulScalar(0.5)).Minimum(y.Abs().AddScalar(1).Sqrt().Log()) // strided and broadcast below
				l := tensor.CrossEntropy(y, labels)
				l = l.Add(tensor.MSE(y.Softmax(1), tgt))
				l = l.Add(tensor.BinaryCrossEntropyWithLogits(y, tgt, tensor.BCEOptions{Weight: tgt.Slice(0, 0, 1), PosWeight: pw}))
				l = l.Add(tensor.BinaryCrossEntropy(y.Sigmoid(), tgt, tensor.BCEOptions{Weight: tgt, Reduction: tensor.ReduceSum}))
				e := tensor.Embedding(emb, idx) // [2, 3, 3]
				l = l.Add(e.Sum().Mul(y.Mean()))
				l = l.Add(tensor.Concat(0, y, y.Slice(0, 1, 3)).Max(1).Mean()).Add(tensor.Concat(1, y, y.Slice(1, 0, 2)).MaxKeep(0).Mean())
				l = l.Add(tensor.Stack(1, y, y.LogSoftmax(0)).SumTo(2, 1).Sum())
				l = l.Add(y.Addcmul(y, y.T().Contiguous().T(), 0.5).Addcdiv(y, y.Abs().AddScalar(1), 0.1).Mean())
				l = l.Add(y.Abs().AddScalar(1).PowScalar(1.5).Pow(y.Sigmoid()).Cast(dtype.F64).Cast(dtype.F32).Sum())
				l = l.Add(e.Permute(2, 0, 1).Reshape(3, 6).Slice(1, 1, 4).Unsqueeze(0).Squeeze(0).Unsqueeze(1).Expand(3, 2, 3).Sum())
				l.Backward()
				for i, p := range params {
					tensor.StepAdam(kernels.Adam{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}, 1, p, p.Grad(), m[i], v[i])
				}
			}
			reset := func() {
				for _, p := range params {
					p.ZeroGrad(true)
				}
			}
			failEveryAllocation(t, base, d, step, reset)
			data.Close()
			for _, p := range params {
				p.Release()
			}
			requireEmpty(t, base)
		})
	}
}

// opInputs are the inputs of opCases on one device: F32, F16 or F64 leaves that
// require grad (some transposed, some broadcast), labels, indices, a second device.
type opInputs struct {
	x, xl, xt, row, p, w, bias, pos *tensor.Tensor
	labels, idx, loss               *tensor.Tensor
	other                           device.Device
}

func newOpInputs(t *testing.T, s *tensor.Scope, d device.Device, dt dtype.DType) *opInputs {
	o := &opInputs{
		x:     s.Randn(d, dt, 4, 3).SetRequiresGrad(true),
		xl:    s.Randn(d, dt, 3, 4).SetRequiresGrad(true),
		row:   s.Randn(d, dtype.F32, 3).SetRequiresGrad(true),
		p:     s.Rand(d, dt, 4, 3).SetRequiresGrad(true),
		w:     s.Randn(d, dt, 5, 3).SetRequiresGrad(true),
		bias:  s.Ones(d, dt, 5),
		pos:   s.Rand(d, dt, 4, 3).AddScalar(1),
		other: newSim(t, 64<<20, d.Residency() == device.Host),
	}
	o.xt = o.xl.T()
	o.labels = tensor.FromSlice(s, d, dtype.I64, []int64{0, 2, 1, 2}, 4)
	o.idx = tensor.FromSlice(s, d, dtype.I64, []int64{0, 4, 3, 3, 1, 2}, 3, 2).T()
	o.loss = o.xt.Mul(o.x).Sum()
	return o
}

// leaves are the inputs that take gradients.
func (o *opInputs) leaves() []*tensor.Tensor { return []*tensor.Tensor{o.x, o.xl, o.row, o.p, o.w} }

// opCases is a call of every op of the table on o's inputs (with broadcast, strided
// and mixed-type inputs), and of the calls made of several ops (the weighted losses,
// Grad).
func (o *opInputs) opCases() map[string]func() *tensor.Tensor {
	x, xt, row, p, w, bias, pos := o.x, o.xt, o.row, o.p, o.w, o.bias, o.pos
	return map[string]func() *tensor.Tensor{
		"Add":          func() *tensor.Tensor { return xt.Add(row) },
		"Mul":          func() *tensor.Tensor { return xt.Mul(row) },
		"Div":          func() *tensor.Tensor { return xt.Div(row) },
		"Pow":          func() *tensor.Tensor { return p.Pow(row) },
		"Maximum":      func() *tensor.Tensor { return xt.Maximum(row) },
		"PowScalar":    func() *tensor.Tensor { return p.PowScalar(1.5) },
		"Exp":          func() *tensor.Tensor { return xt.Exp() },
		"Gelu":         func() *tensor.Tensor { return xt.Gelu() },
		"Sum":          func() *tensor.Tensor { return xt.Sum(0) },
		"SumAs":        func() *tensor.Tensor { return xt.SumAs(dtype.F64, 1) },
		"Mean":         func() *tensor.Tensor { return xt.MeanKeep(1) },
		"Max":          func() *tensor.Tensor { return xt.Max(1) },
		"SumTo":        func() *tensor.Tensor { return xt.SumTo(1, 3) },
		"MatMul":       func() *tensor.Tensor { return xt.MatMul(w.T()) },
		"Linear":       func() *tensor.Tensor { return tensor.Linear(xt, w, nil) },
		"LinearBias":   func() *tensor.Tensor { return tensor.Linear(xt, w, bias) },
		"Softmax":      func() *tensor.Tensor { return xt.Softmax(1) },
		"SoftmaxAs":    func() *tensor.Tensor { return xt.SoftmaxAs(dtype.F64, 0) },
		"LogSoftmax":   func() *tensor.Tensor { return xt.LogSoftmax(0) },
		"CrossEntropy": func() *tensor.Tensor { return tensor.CrossEntropy(xt, o.labels) },
		"MSE":          func() *tensor.Tensor { return tensor.MSE(xt, x) },
		"LayerNorm":    func() *tensor.Tensor { return tensor.LayerNorm(xt, row, row, 1e-5) },
		"Embedding":    func() *tensor.Tensor { return tensor.Embedding(w, o.idx) },
		"Dropout":      func() *tensor.Tensor { return xt.Dropout(0.5) },
		"Cast":         func() *tensor.Tensor { return xt.Cast(dtype.BF16) },
		"Clone":        func() *tensor.Tensor { return xt.Clone() },
		"Contiguous":   func() *tensor.Tensor { return xt.Contiguous() },
		"To":           func() *tensor.Tensor { return xt.To(o.other) },
		"Concat":       func() *tensor.Tensor { return tensor.Concat(1, xt, x, row.Unsqueeze(0).Expand(4, 3)) },
		"Stack":        func() *tensor.Tensor { return tensor.Stack(0, xt, x) },
		"BCE": func() *tensor.Tensor {
			return tensor.BinaryCrossEntropy(p, p.Detach(), tensor.BCEOptions{Weight: row})
		},
		"BCEWithLogits": func() *tensor.Tensor {
			return tensor.BinaryCrossEntropyWithLogits(xt, p, tensor.BCEOptions{Weight: row, PosWeight: row.Detach(), Reduction: tensor.ReduceSum})
		},
		"Addcmul": func() *tensor.Tensor { return xt.Addcmul(row, x, 0.5) },
		"Addcdiv": func() *tensor.Tensor { return xt.Addcdiv(row, pos, 0.5) },
		"Grad": func() *tensor.Tensor {
			gs := tensor.Grad([]*tensor.Tensor{o.loss}, []*tensor.Tensor{xt, p, x}, tensor.GradOptions{MaterializeGrads: true, RetainGraph: true})
			gs[1].Release()
			gs[2].Release()
			return gs[0]
		},
	}
}

// Every op that runs out of memory at any of its allocations leaves the device as it
// found it, with its scope still open: what it made is released then, not when the
// scope closes.
func TestEveryAllocationOfAnOpMayFail(t *testing.T) {
	base := newSim(t, 1<<30, true)
	d := tensortest.NewFlaky(t, base)
	s := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(5)))
	defer s.Close()
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.F64} {
		o := newOpInputs(t, s, d, dt)
		for name, f := range o.opCases() {
			t.Run(dt.String()+"/"+name, func(t *testing.T) {
				before := requested(t, base)
				d.Refuse(0)
				y, err := tensor.TryValue(f)
				require.NoError(t, err)
				y.Release()
				total := d.Allocs()
				require.Equal(t, before, requested(t, base))
				for n := 1; n <= total; n++ {
					d.Refuse(n)
					_, err := tensor.TryValue(f)
					require.ErrorIs(t, err, device.ErrOutOfMemory, "allocation %d of %d refused", n, total)
					require.Equal(t, before, requested(t, base), "allocation %d of %d refused (%v): the op left memory behind", n, total, err)
				}
				d.Refuse(0)
				if !y.RequiresGrad() {
					return
				}
				// Its backward, failing at each of its allocations, leaves nothing once
				// the graph is released and the gradients dropped.
				leaves := o.leaves()
				backward := func(refuse int) (int, error) {
					y := f()
					defer y.Release()
					l := y.Sum()
					defer l.Release()
					d.Refuse(refuse)
					err := tensor.Try(l.Backward)
					calls := d.Allocs()
					d.Refuse(0)
					for _, leaf := range leaves {
						leaf.ZeroGrad(true)
					}
					return calls, err
				}
				total, err = backward(0)
				require.NoError(t, err)
				require.Equal(t, before, requested(t, base))
				for n := 1; n <= total; n++ {
					_, err := backward(n)
					require.ErrorIs(t, err, device.ErrOutOfMemory, "backward: allocation %d of %d refused", n, total)
					require.Equal(t, before, requested(t, base), "backward: allocation %d of %d refused (%v): memory left behind", n, total, err)
				}
			})
		}
	}
}

// Every op, forward and backward, allocates and frees the same blocks, in the same
// order, on meta (which computes nothing) as on a device that computes: memory proved
// on meta is the memory of the real run.
func TestMetaAllocatesAsADeviceThatComputes(t *testing.T) {
	type run struct {
		d *tensortest.Flaky
		o *opInputs
	}
	s := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(5)))
	defer s.Close()
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.F64} {
		var runs []run
		for _, backing := range []bool{true, false} {
			base := newSim(t, 1<<30, backing)
			d := tensortest.NewFlaky(t, base)
			runs = append(runs, run{d, newOpInputs(t, s, d, dt)})
		}
		for name := range runs[0].o.opCases() {
			t.Run(dt.String()+"/"+name, func(t *testing.T) {
				var logs [2][]int64
				for i, r := range runs {
					r.d.Record(true)
					y := r.o.opCases()[name]()
					if y.RequiresGrad() {
						l := y.Sum()
						l.Backward()
						l.Release()
					}
					y.Release()
					for _, l := range r.o.leaves() {
						l.ZeroGrad(true)
					}
					r.d.Record(false)
					logs[i] = r.d.Events()
				}
				require.NotEmpty(t, logs[0])
				require.Equal(t, logs[0], logs[1], "allocations (+) and frees (−) on sim with data and on meta")
			})
		}
	}
}

// Grad out of memory for the zeros MaterializeGrads makes loses no gradient: the
// gradients it computed belong to nobody until it returns them.
func TestGradOutOfMemoryLosesNoGradient(t *testing.T) {
	base := newSim(t, 1<<30, true)
	d := tensortest.NewFlaky(t, base)
	s := tensor.NewScope()
	a := s.Ones(d, dtype.F32, 3).SetRequiresGrad(true)
	b := s.Ones(d, dtype.F32, 3).SetRequiresGrad(true)
	unused := s.Ones(d, dtype.F32, 3).SetRequiresGrad(true)
	l := a.Mul(b).Sum()
	before := requested(t, base)
	// The backward allocates the seed and the two gradients; the zeros for unused
	// (between a's gradient and b's) are the fourth allocation.
	d.Refuse(4)
	requireOpError(t, "Full", device.ErrOutOfMemory, func() {
		tensor.Grad([]*tensor.Tensor{l}, []*tensor.Tensor{a, unused, b}, tensor.GradOptions{MaterializeGrads: true})
	})
	d.Refuse(0)
	require.Equal(t, before, requested(t, base), "a's gradient (which the scope took) and b's (which nobody had) are released")
	s.Close()
	requireEmpty(t, base)
}
