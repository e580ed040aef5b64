package main

import (
	"fmt"
	"math/rand/v2"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// opDTypes are the element types of the GPU ops, with the name their cases carry.
var opDTypes = []struct {
	name string
	dt   dtype.DType
}{{"f32", dtype.F32}, {"f16", dtype.F16}, {"bf16", dtype.BF16}}

// gpuOpCases sets up the ops experiment's inputs in data on dev, a GPU (or a device
// without data, where the cases only allocate): issue 18's kernel families, each in
// F32, F16 and BF16 over big elements (64M: -opsize) or the [big/1024, 1024] matrix of
// their rows, then the casts between the types, the products of square matrices of a
// quarter of big elements at most (4096² for 64M) in three transpose combinations and
// the host cost of a small op. The F16 and BF16 inputs are casts of the F32 ones. The
// names say 64M and 4096 whatever big is: the cases of torch_ops.py --device cuda.
//
// GB/s counts each element's bytes read and written once, e bytes an element:
// copy (a contiguous clone: the practical bandwidth), relu, gelu-tanh, softmax-rows,
// log-softmax-rows, layernorm (over rows of 1024, weight and bias), transpose (of the
// matrix, made contiguous) and add-bias (a [1024] row broadcast over the matrix) read
// and write 2e; add, mul and relu-backward (gradient and saved output in, gradient out)
// 3e; the reductions (sum of all, sum-rows: Sum(1), sum-cols: Sum(0), the bias
// gradient, max-rows) and cross-entropy (with I64 labels per row) e. What is per row or
// per column (a bias, labels, a row's result) is 1/1024 of that and not counted. A cast
// reads 4 and writes 2 bytes an element, or the reverse: 6.
func gpuOpCases(data *tensor.Scope, dev device.Device, big int) []opCase {
	const width = 1024
	rows := big / width
	n := 4096
	for n*n > big/4 {
		n /= 2
	}
	x32, y32 := data.Randn(dev, dtype.F32, big), data.Randn(dev, dtype.F32, big)
	a32, b32 := data.Randn(dev, dtype.F32, n, n), data.Randn(dev, dtype.F32, n, n)
	rng := rand.New(rand.NewPCG(2, 3))
	labels := make([]int64, rows)
	for i := range labels {
		labels[i] = rng.Int64N(width)
	}
	lab := tensor.FromSlice(data, dev, dtype.I64, labels)
	flops := 2 * float64(n*n*n) / 1e9
	var cases []opCase
	inputs := map[string]*tensor.Tensor{}
	for _, d := range opDTypes {
		x, y, a, b := x32, y32, a32, b32
		if d.dt != dtype.F32 {
			x, y, a, b = x32.Cast(d.dt), y32.Cast(d.dt), a32.Cast(d.dt), b32.Cast(d.dt)
		}
		inputs[d.name] = x
		m := x.Reshape(rows, width)
		bias, w := y.Slice(0, 0, width), y.Slice(0, width, 2*width)
		relu, grad := reluGraph(data, x)
		e := float64(d.dt.Size())
		gb := func(bytesPer float64) float64 { return bytesPer * e * float64(big) / 1e9 }
		name := func(op string) string { return fmt.Sprintf("%s-%s-64M", op, d.name) }
		cases = append(cases,
			opCase{name: name("copy"), unit: "GB/s", work: gb(2), run: func(s *tensor.Scope) { s.Bind(x).Clone() }},
			opCase{name: name("add"), unit: "GB/s", work: gb(3), run: func(s *tensor.Scope) { s.Bind(x).Add(y) }},
			opCase{name: name("add-bias"), unit: "GB/s", work: gb(2), run: func(s *tensor.Scope) { s.Bind(m).Add(bias) }},
			opCase{name: name("mul"), unit: "GB/s", work: gb(3), run: func(s *tensor.Scope) { s.Bind(x).Mul(y) }},
			opCase{name: name("relu"), unit: "GB/s", work: gb(2), run: func(s *tensor.Scope) { s.Bind(x).Relu() }},
			opCase{name: name("relu-backward"), unit: "GB/s", work: gb(3), run: func(s *tensor.Scope) {
				tensor.Grad([]*tensor.Tensor{s.Bind(relu)}, []*tensor.Tensor{grad}, tensor.GradOptions{GradOutputs: []*tensor.Tensor{y}, RetainGraph: true})
			}, note: "tensor.Grad through a recorded Relu: its backward kernel alone"},
			opCase{name: name("gelu-tanh"), unit: "GB/s", work: gb(2), run: func(s *tensor.Scope) { s.Bind(x).GeluTanh() }},
			opCase{name: name("sum"), unit: "GB/s", work: gb(1), run: func(s *tensor.Scope) { s.Bind(x).Sum() }},
			opCase{name: name("sum-rows"), unit: "GB/s", work: gb(1), run: func(s *tensor.Scope) { s.Bind(m).Sum(1) }},
			opCase{name: name("sum-cols"), unit: "GB/s", work: gb(1), run: func(s *tensor.Scope) { s.Bind(m).Sum(0) }},
			opCase{name: name("max-rows"), unit: "GB/s", work: gb(1), run: func(s *tensor.Scope) { s.Bind(m).Max(1) }},
			opCase{name: name("softmax-rows"), unit: "GB/s", work: gb(2), run: func(s *tensor.Scope) { s.Bind(m).Softmax(1) }},
			opCase{name: name("log-softmax-rows"), unit: "GB/s", work: gb(2), run: func(s *tensor.Scope) { s.Bind(m).LogSoftmax(1) }},
			opCase{name: name("cross-entropy"), unit: "GB/s", work: gb(1), run: func(s *tensor.Scope) { tensor.CrossEntropy(s.Bind(m), lab) }},
			opCase{name: name("layernorm"), unit: "GB/s", work: gb(2), run: func(s *tensor.Scope) { tensor.LayerNorm(s.Bind(m), w, bias, 1e-5) }},
			opCase{name: name("transpose"), unit: "GB/s", work: gb(2), run: func(s *tensor.Scope) { s.Bind(m).T().Contiguous() }},
		)
		mm := func(layout string, run func(s *tensor.Scope)) opCase {
			return opCase{name: fmt.Sprintf("matmul-%s-%s-4096", layout, d.name), unit: "GFLOP/s", work: flops, run: run}
		}
		cases = append(cases,
			mm("nn", func(s *tensor.Scope) { s.Bind(a).MatMul(b) }),
			mm("nt", func(s *tensor.Scope) { s.Bind(a).MatMul(b.T()) }),
			mm("tn", func(s *tensor.Scope) { s.Bind(a).T().MatMul(b) }))
	}
	cast := func(from, to string, dt dtype.DType) opCase {
		x := inputs[from]
		return opCase{name: fmt.Sprintf("cast-%s-%s-64M", from, to), unit: "GB/s", work: 6 * float64(big) / 1e9,
			run: func(s *tensor.Scope) { s.Bind(x).Cast(dt) }}
	}
	cases = append(cases, cast("f32", "f16", dtype.F16), cast("f16", "f32", dtype.F32),
		cast("f32", "bf16", dtype.BF16), cast("bf16", "f32", dtype.F32), smallAdd(data, dev))
	return cases
}

// reluGraph returns relu(x) recorded for autograd, owned by data, and the leaf it
// differentiates to (a handle on x's storage that requires grad): tensor.Grad from the
// first to the second runs the ReLU backward kernel alone, as autograd runs it in a
// training step (PyTorch's threshold_backward).
func reluGraph(data *tensor.Scope, x *tensor.Tensor) (relu, leaf *tensor.Tensor) {
	leaf = x.Detach().SetRequiresGrad(true)
	g := data.With(tensor.EnableGrad())
	defer g.Close() // ops on data's tensors would otherwise run in the region, not in each run's scope
	return g.Bind(leaf).Relu(), leaf
}
