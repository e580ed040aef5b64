package amp_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/amp"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// TestAutocastOutputTypes checks each op's result type under autocast against the
// types PyTorch 2.11 gives under autocast("cuda", float16) (docs/autocast.md: a is F32, h
// = a@a is low precision), and the same policy for bfloat16.
func TestAutocastOutputTypes(t *testing.T) {
	for _, low := range []dtype.DType{dtype.F16, dtype.BF16} {
		t.Run(low.String(), func(t *testing.T) {
			d := tensortest.CPU(t)
			root := tensor.NewScope()
			ac := autocast(t, root, low)
			a := f32(ac, d, []float32{0.25, 0.5, 0.75, 1}, 2, 2)
			h := a.MatMul(a)
			labels := tensor.FromSlice(ac, d, dtype.I64, []int64{0, 1})
			for _, c := range []struct {
				name string
				got  *tensor.Tensor
				want dtype.DType
			}{
				// [V] rows.
				{"mm", h, low},
				{"linear", tensor.Linear(a, a, nil), low},
				{"softmax", h.Softmax(-1), dtype.F32},
				{"log_softmax", h.LogSoftmax(-1), dtype.F32},
				{"layer_norm", tensor.LayerNorm(h, nil, nil, 1e-5), dtype.F32},
				{"sum", h.Sum(), dtype.F32},
				{"mean", h.Mean(), low},
				{"relu", h.Relu(), low},
				{"h+a", h.Add(a), dtype.F32},
				{"exp", h.Exp(), dtype.F32},
				{"mse_loss", tensor.MSE(h, a), dtype.F32},
				{"cross_entropy", tensor.CrossEntropy(h, labels), dtype.F32},
				{"cat", tensor.Concat(0, h, a), dtype.F32},
				// The rest of the lists, as tensor has them.
				{"linear with bias", tensor.Linear(a, a, a.Sum(0)), low},
				{"log", h.Log(), dtype.F32},
				{"pow", h.Pow(h), dtype.F32},
				{"pow scalar", h.PowScalar(2), dtype.F32},
				{"sum_to", h.SumTo(1, 2), dtype.F32},
				{"layer_norm with weight", tensor.LayerNorm(h, a.Sum(0), nil, 1e-5), dtype.F32},
				{"stack", tensor.Stack(0, h, a), dtype.F32},
				{"h*h", h.Mul(h), low},
				{"max", h.Max(0), low},
				{"tanh", h.Tanh(), low},
				{"transpose", h.T(), low},
				{"embedding", tensor.Embedding(a, labels), dtype.F32},
				// Ops on F32 that are not in the low-precision list stay F32.
				{"relu of f32", a.Relu(), dtype.F32},
				{"mean of f32", a.Mean(), dtype.F32},
				{"sum keeping dims", h.SumKeep(0), dtype.F32},
				{"softmax of f32", a.Softmax(0), dtype.F32},
				// Explicit types are kept ([V] softmax(dtype=float16) is fp16).
				{"softmax(dtype=low)", h.SoftmaxAs(low, -1), low},
				{"log_softmax(dtype=low)", a.LogSoftmaxAs(low, -1), low},
				{"sum(dtype=low)", a.SumAs(low), low},
				{"cast to f32", h.Cast(dtype.F32), dtype.F32},
				{"cast to f16", a.Cast(dtype.F16), dtype.F16},
			} {
				require.Equal(t, c.want, c.got.DType(), c.name)
			}
			// The products computed from low-precision operands: a's values are exact
			// in both formats and so are the sums of products here.
			require.Equal(t, []float32{0.4375, 0.625, 0.9375, 1.375}, vals(h))
			root.Close()
			tensortest.RequireEmpty(t, d)
		})
	}
}

// TestF32ResultsWithoutF32Copies: Softmax, LogSoftmax and Sum of a 16-bit input give
// an F32 result computed from the input as it is (PyTorch's fp32_set_opt_dtype); the
// F32-list ops (Exp here) cast the input first, a copy the op's scope holds until it
// closes.
func TestF32ResultsWithoutF32Copies(t *testing.T) {
	d := tensortest.Meta(t)
	root := tensor.NewScope(tensor.NoGrad())
	h := root.Empty(d, dtype.F16, 1024, 1024)
	ac := autocast(t, root, dtype.F16)
	for _, c := range []struct {
		name string
		op   func(h *tensor.Tensor) *tensor.Tensor
		adds int64
	}{
		{"softmax", func(h *tensor.Tensor) *tensor.Tensor { return h.Softmax(-1) }, 4 * MiB},
		{"log_softmax", func(h *tensor.Tensor) *tensor.Tensor { return h.LogSoftmax(-1) }, 4 * MiB},
		{"sum", func(h *tensor.Tensor) *tensor.Tensor { return h.Sum(1) }, 4096},
		{"sum_to", func(h *tensor.Tensor) *tensor.Tensor { return h.SumTo(1, 1024) }, 4096},
		// Exp runs on an F32 cast of its input, freed when the op returns.
		{"exp", func(h *tensor.Tensor) *tensor.Tensor { return h.Exp() }, 4 * MiB},
	} {
		before := tensortest.Requested(t, d)
		y := c.op(ac.Bind(h))
		require.Equal(t, dtype.F32, y.DType(), c.name)
		require.Equal(t, c.adds, tensortest.Requested(t, d)-before, c.name)
	}
	root.Close()
	tensortest.RequireEmpty(t, d)
}

func TestAutocastRejectsOtherTypes(t *testing.T) {
	s := tensor.NewScope()
	defer s.Close()
	for _, dt := range []dtype.DType{dtype.F32, dtype.I64, dtype.Invalid} {
		_, err := amp.Autocast(s, dt)
		require.ErrorContains(t, err, "only float16 and bfloat16")
	}
	_, err := amp.Autocast(nil, dtype.F16)
	require.ErrorContains(t, err, "no parent scope")
}

// TestAutocastGradientsReachF32Weights runs a Linear under F16 autocast: the op saves
// and computes in F16, the gradients arrive at the F32 weight and bias as F32 and
// equal the product of the F16-rounded operands.
func TestAutocastGradientsReachF32Weights(t *testing.T) {
	d := tensortest.CPU(t)
	w := param(d, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	b := param(d, []float32{0.5, -0.5}, 2)
	root := tensor.NewScope()
	x := f32(root, d, []float32{1, 0.5, 0.25, 2, 1, 0.5}, 2, 3).SetRequiresGrad(true)
	ac := autocast(t, root, dtype.F16)
	y := tensor.Layer(ac.Bind(x), func(x *tensor.Tensor) *tensor.Tensor { return tensor.Linear(x, w, b) })
	require.Equal(t, dtype.F16, y.DType())
	loss := y.Sum()
	require.Equal(t, dtype.F32, loss.DType())
	// x·wᵀ+b: rows (1+1+0.75+0.5, 4+2.5+1.5-0.5) and (2+2+1.5+0.5, 8+5+3-0.5).
	require.Equal(t, []float32{3.25, 7.5, 6, 15.5}, vals(y))
	loss.Backward()
	require.Equal(t, dtype.F32, w.Grad().DType())
	require.Equal(t, []float32{3, 1.5, 0.75, 3, 1.5, 0.75}, vals(w.Grad()), "column sums of x")
	require.Equal(t, []float32{2, 2}, vals(b.Grad()))
	require.Equal(t, dtype.F32, x.Grad().DType())
	require.Equal(t, []float32{5, 7, 9, 5, 7, 9}, vals(x.Grad()), "column sums of w")
	root.Close()
	w.Release()
	b.Release()
	tensortest.RequireEmpty(t, d)
}

// TestAutocastNesting: a scope nested with Enabled(false) runs ops in their inputs'
// types ([V] an inner enabled=False Linear on F32 returns F32); re-enabling inside it
// needs no casts; tensor.WithAutocast(nil) leaves autocast.
func TestAutocastNesting(t *testing.T) {
	d := tensortest.CPU(t)
	w := param(d, seq(4, 0.5), 2, 2)
	root := tensor.NewScope()
	ac := autocast(t, root, dtype.F16)
	x := f32(ac, d, seq(4, 1), 2, 2)
	h := tensor.Linear(x, w, nil)
	require.Equal(t, dtype.F16, h.DType())

	off := autocast(t, ac, dtype.F16, amp.Enabled(false))
	require.Equal(t, dtype.F32, tensor.Linear(off.Bind(x), w, nil).DType())
	require.Equal(t, dtype.F32, tensor.Linear(off.Bind(h), w, nil).DType(), "F16 with an F32 weight promotes")
	require.Equal(t, dtype.F16, off.Bind(h).Exp().DType(), "no F32 list either")
	again := autocast(t, off, dtype.F16)
	require.Equal(t, dtype.F16, tensor.Linear(again.Bind(x), w, nil).DType())
	bf := autocast(t, off, dtype.BF16)
	require.Equal(t, dtype.BF16, tensor.Linear(bf.Bind(x), w, nil).DType())

	plain := ac.Child(tensor.WithAutocast(nil))
	require.Equal(t, dtype.F32, tensor.Linear(plain.Bind(x), w, nil).DType())
	require.Zero(t, amp.CacheBytes(plain))

	// One region: the weight was cast once to F16 and once to BF16.
	require.Equal(t, int64(2*8), amp.CacheBytes(ac))
	require.Equal(t, amp.CacheBytes(ac), amp.CacheBytes(again))
	root.Close()
	w.Release()
	tensortest.RequireEmpty(t, d)
}
