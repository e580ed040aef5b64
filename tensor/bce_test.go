package tensor_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/amp"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// bceRef is the binary cross-entropy of probability p against target y in float64,
// from its definition, with PyTorch's clamp of each logarithm at −100.
func bceRef(p, y float64) float64 {
	return -(y*math.Max(math.Log(p), -100) + (1-y)*math.Max(math.Log(1-p), -100))
}

// bceLogitsRef is the binary cross-entropy of σ(v) against y, the positive term
// weighted by pw, from the definition in float64.
func bceLogitsRef(v, y, pw float64) float64 {
	s := 1 / (1 + math.Exp(-v))
	return -(pw*y*math.Log(s) + (1-y)*math.Log(1-s))
}

// f32of is an F32 tensor of shape holding data rounded to float32, on d, owned by s.
func f32of(s *tensor.Scope, d device.Device, data []float64, shape ...int) *tensor.Tensor {
	v := make([]float32, len(data))
	for i, x := range data {
		v[i] = float32(x)
	}
	return f32(s, d, v, shape...)
}

func sum64(v []float64) float64 {
	t := 0.0
	for _, x := range v {
		t += x
	}
	return t
}

func TestBinaryCrossEntropyKnownValues(t *testing.T) {
	for _, dev := range dataDevices(t) {
		t.Run(dev.Name, func(t *testing.T) {
			d := dev.Device
			p := []float64{0.1, 0.5, 0.9, 0, 1, 0.3}
			y := []float64{0, 1, 1, 0, 0, 0.25}
			w := []float64{1, 2, 0.5, 1, 3, 1}
			want := make([]float64, len(p))
			dx := make([]float64, len(p))
			dy := make([]float64, len(p))
			for i := range p {
				want[i] = bceRef(p[i], y[i])
				// d/dp and d/dy of the mean, from the definition (PyTorch bounds the
				// denominator p(1−p) below by 1e-12 and leaves −logit unclamped).
				dx[i] = (p[i] - y[i]) / math.Max(p[i]*(1-p[i]), 1e-12) / 6
				dy[i] = -math.Log(p[i]/(1-p[i])) / 6
			}
			require.InDelta(t, 100, want[4], 1e-12, "ln 0 is clamped at −100")
			s := tensor.NewScope()
			x := f32of(s, d, p, 2, 3).SetRequiresGrad(true)
			tg := f32of(s, d, y, 2, 3).SetRequiresGrad(true)
			none := tensor.BinaryCrossEntropy(x, tg, tensor.BCEOptions{Reduction: tensor.ReduceNone})
			require.Equal(t, []int{2, 3}, none.Shape())
			require.InDeltaSlice(t, want, vals64(none), 1e-5)
			sum := tensor.BinaryCrossEntropy(x, tg, tensor.BCEOptions{Reduction: tensor.ReduceSum})
			require.InDelta(t, sum64(want), sum.Item(), 1e-4)

			mean := tensor.BinaryCrossEntropy(x, tg, tensor.BCEOptions{})
			require.Empty(t, mean.Shape())
			require.InDelta(t, sum64(want)/6, mean.Item(), 1e-5)
			mean.Backward()
			gx := vals64(x.Grad())
			for i, g := range dx {
				require.InDelta(t, g, gx[i], 1e-4*math.Max(1, math.Abs(g)), "d/dx %d", i)
			}
			gy := vals64(tg.Grad())
			require.InDeltaSlice(t, dy[:3], gy[:3], 1e-5)
			require.True(t, math.IsInf(gy[3], 1) && math.IsInf(gy[4], -1), "−logit at 0 and 1: %v", gy)
			require.InDelta(t, dy[5], gy[5], 1e-5)

			weight := f32of(s, d, w, 2, 3)
			weighted := tensor.BinaryCrossEntropy(x, tg, tensor.BCEOptions{Weight: weight, Reduction: tensor.ReduceSum})
			ws := 0.0
			for i := range want {
				ws += w[i] * want[i]
			}
			require.InDelta(t, ws, weighted.Item(), 1e-4)
			s.Close()
			requireEmpty(t, d)
		})
	}
}

func TestBinaryCrossEntropyWithLogitsKnownValues(t *testing.T) {
	d := newCPU(t)
	v := []float64{-15, -2, -0.5, 0, 0.5, 2, 7, 15}
	y := []float64{0, 1, 0.5, 1, 0, 0.25, 1, 0}
	pw := []float64{0.5, 3}
	s := tensor.NewScope()
	defer s.Close()
	x := f32of(s, d, v, 4, 2).SetRequiresGrad(true)
	tg := f32of(s, d, y, 4, 2).SetRequiresGrad(true)
	posw := f32of(s, d, pw, 2)
	for _, withPW := range []bool{false, true} {
		o := tensor.BCEOptions{Reduction: tensor.ReduceNone}
		if withPW {
			o.PosWeight = posw
		}
		got := vals64(tensor.BinaryCrossEntropyWithLogits(x, tg, o))
		mean := 0.0
		for i := range v {
			w := 1.0
			if withPW {
				w = pw[i%2]
			}
			want := bceLogitsRef(v[i], y[i], w)
			require.InDelta(t, want, got[i], 1e-5*math.Max(1, want), "element %d, positive weight %v", i, withPW)
			mean += want / 8
		}
		o.Reduction = tensor.ReduceMean
		loss := tensor.BinaryCrossEntropyWithLogits(x, tg, o)
		require.InDelta(t, mean, loss.Item(), 1e-5)
		loss.Backward()
		gx, gy := vals64(x.Grad()), vals64(tg.Grad())
		for i := range v {
			w := 1.0
			if withPW {
				w = pw[i%2]
			}
			sg := 1 / (1 + math.Exp(-v[i]))
			// d/dv of −(w·y·ln σ + (1−y)·ln(1−σ)) is −w·y·(1−σ) + (1−y)·σ; d/dy is
			// −w·ln σ + ln(1−σ).
			require.InDelta(t, (-w*y[i]*(1-sg)+(1-y[i])*sg)/8, gx[i], 1e-6, "d/dx %d", i)
			require.InDelta(t, (-w*math.Log(sg)+math.Log(1-sg))/8, gy[i], 1e-5, "d/dy %d", i)
		}
		x.ZeroGrad(true)
		tg.ZeroGrad(true)
	}
}

// bceChecks are the gradient checks of the binary cross-entropies.
func bceChecks(d device.Device) []gc {
	cases := []gc{
		{name: "BCE", op: tensor.OpBinaryCrossEntropy, shapes: [][]int{{2, 3}, {2, 3}}, f: func(_ *tensor.Scope, x []in) in {
			return tensor.BinaryCrossEntropy(x[0], x[1], tensor.BCEOptions{Reduction: tensor.ReduceNone})
		}},
		{name: "BCEWithLogits", op: tensor.OpBinaryCrossEntropyWithLogits, shapes: [][]int{{3, 2}, {3, 2}}, f: func(s *tensor.Scope, x []in) in {
			pw := tensor.FromSlice(s, d, dtype.F32, []float32{0.5, 2})
			return tensor.BinaryCrossEntropyWithLogits(x[0], x[1], tensor.BCEOptions{PosWeight: pw, Reduction: tensor.ReduceSum})
		}},
	}
	cases[0].values = func(r *rand.Rand) float64 { return 0.1 + 0.8*r.Float64() }
	return cases
}

func TestGradcheckBinaryCrossEntropy(t *testing.T) {
	d := newCPU(t)
	runChecks(t, d, bceChecks(d))
}

// The plain loss saves its two inputs, nothing else: after the forward the allocator
// holds the inputs and the loss; the per-element losses died with their handle.
func TestBinaryCrossEntropyMemory(t *testing.T) {
	for _, dev := range []tensortest.Device{{Name: "cpu", Device: newCPU(t)}, {Name: "meta", Device: tensortest.Meta(t)}} {
		t.Run(dev.Name, func(t *testing.T) {
			d := dev.Device
			s := tensor.NewScope()
			x := s.Full(d, dtype.F32, 0.25, 64, 32).SetRequiresGrad(true)
			y := s.Zeros(d, dtype.F32, 64, 32)
			loss := tensor.BinaryCrossEntropy(x, y, tensor.BCEOptions{})
			tensortest.RequireLive(t, d, "after the forward", tensortest.Sizes(x, y, loss)...)
			loss.Backward()
			tensortest.RequireLive(t, d, "after the backward", tensortest.Sizes(x, y, loss, x.Grad())...)
			s.Close()
			requireEmpty(t, d)
		})
	}
}

func TestBinaryCrossEntropyErrors(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f32(s, d, []float32{0.5, 1.5, -1, float32(math.NaN())}, 4)
	y := s.Zeros(d, dtype.F32, 4)
	err := tensor.Try(func() { tensor.BinaryCrossEntropy(x, y, tensor.BCEOptions{}) })
	var re *kernels.RangeError
	require.True(t, errors.As(err, &re), "%v", err)
	require.Equal(t, 3, re.Count, "1.5, −1 and NaN")
	require.Contains(t, err.Error(), "between 0 and 1")

	ok := f32(s, d, []float32{0.5, 0.5, 0.5, 0.5}, 4)
	requireOpError(t, tensor.OpBinaryCrossEntropy, tensor.ErrShape, func() {
		tensor.BinaryCrossEntropy(ok, s.Zeros(d, dtype.F32, 2, 2), tensor.BCEOptions{})
	})
	requireOpError(t, tensor.OpBinaryCrossEntropy, tensor.ErrShape, func() {
		tensor.BinaryCrossEntropy(ok, y, tensor.BCEOptions{PosWeight: y})
	})
	requireOpError(t, tensor.OpBinaryCrossEntropyWithLogits, tensor.ErrShape, func() {
		tensor.BinaryCrossEntropyWithLogits(ok, y, tensor.BCEOptions{Weight: s.Ones(d, dtype.F32, 3)})
	})
	requireOpError(t, tensor.OpBinaryCrossEntropyWithLogits, tensor.ErrShape, func() {
		tensor.BinaryCrossEntropyWithLogits(ok, y, tensor.BCEOptions{Reduction: 7})
	})
	pw := s.Ones(d, dtype.F32, 4).SetRequiresGrad(true)
	requireOpError(t, tensor.OpBinaryCrossEntropyWithLogits, tensor.ErrGrad, func() {
		tensor.BinaryCrossEntropyWithLogits(ok.SetRequiresGrad(true), y, tensor.BCEOptions{PosWeight: pw})
	})
	s.Close()
	requireEmpty(t, d)
}

// Under autocast the plain loss is refused with PyTorch's message and the logits form
// runs in F32; a scope with autocast disabled runs the plain loss.
func TestBinaryCrossEntropyUnderAutocast(t *testing.T) {
	d := newCPU(t)
	root := tensor.NewScope()
	ac, err := amp.Autocast(root, dtype.F16)
	require.NoError(t, err)
	x := f32(ac, d, []float32{0.25, 0.75}, 2)
	h := x.Cast(dtype.F16)
	y := f32(ac, d, []float32{0, 1}, 2)
	te := requireOpError(t, tensor.OpBinaryCrossEntropy, tensor.ErrAutocastBanned, func() {
		tensor.BinaryCrossEntropy(h.Sigmoid(), y, tensor.BCEOptions{})
	})
	require.Contains(t, te.Error(), "unsafe to autocast")
	require.Contains(t, te.Error(), "BinaryCrossEntropyWithLogits")

	l := tensor.BinaryCrossEntropyWithLogits(h, y, tensor.BCEOptions{})
	require.Equal(t, dtype.F32, l.DType(), "the logits form is in the fp32 list")
	off, err := amp.Autocast(ac, dtype.F16, amp.Enabled(false))
	require.NoError(t, err)
	plain := tensor.BinaryCrossEntropy(off.Bind(x), off.Bind(y), tensor.BCEOptions{})
	require.InDelta(t, (bceRef(0.25, 0)+bceRef(0.75, 1))/2, plain.Item(), 1e-6)
	require.Equal(t, tensor.AutocastBanned, mustOp(t, tensor.OpBinaryCrossEntropy).Autocast)
	root.Close()
	requireEmpty(t, d)
}

func mustOp(t *testing.T, name string) tensor.OpInfo {
	o, ok := tensor.LookupOp(name)
	require.True(t, ok, name)
	return o
}

// Half-precision inputs outside autocast compute in float32 and give a loss of their
// type, with gradients in their type.
func TestBinaryCrossEntropyHalfInputs(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f32(s, d, []float32{-1, 0, 3}, 3).Cast(dtype.BF16).Detach().SetRequiresGrad(true)
	y := f32(s, d, []float32{0, 1, 1}, 3).Cast(dtype.BF16)
	l := tensor.BinaryCrossEntropyWithLogits(x, y, tensor.BCEOptions{Reduction: tensor.ReduceSum})
	require.Equal(t, dtype.BF16, l.DType())
	want := bceLogitsRef(-1, 0, 1) + bceLogitsRef(0, 1, 1) + bceLogitsRef(3, 1, 1)
	require.InDelta(t, want, l.Item(), want*1e-2)
	l.Backward()
	require.Equal(t, dtype.BF16, x.Grad().DType())
	s.Close()
	requireEmpty(t, d)
}
