package cpu

import (
	"sync/atomic"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// The binary cross-entropy kernels, elementwise over dst's shape: x and y (and the
// positive weight pw of the logits form) broadcast to it, and are read in the type the
// kernel computes in (float64 when an operand is F64, float32 otherwise). The formulas
// are PyTorch's: the logarithms of BinaryCrossEntropy are clamped at −100 so that a
// probability of exactly 0 or 1 gives a finite loss, and its input gradient divides by
// x·(1−x) no smaller than 1e-12.

// bceLogClamp is the least value BinaryCrossEntropy's logarithms take.
const bceLogClamp = -100

// bceEps is the least denominator of BinaryCrossEntropy's input gradient.
const bceEps = 1e-12

// BinaryCrossEntropy writes −(y·max(ln x, −100) + (1−y)·max(ln(1−x), −100)) into dst
// and returns how many x are outside [0, 1] or NaN (their losses are computed all the
// same).
func BinaryCrossEntropy(dst, x, y Operand) (outside int) {
	return byType(bce[float32], bce[float64], dst.dt, x.dt, y.dt)(dst, x, y)
}

func bce[T float](dst, x, y Operand) int {
	k := bceKernel[T]{new(atomic.Int64)}
	elementwise("binary_cross_entropy", dst, []Operand{x, y}, k)
	return int(k.bad.Load())
}

type bceKernel[T float] struct {
	bad *atomic.Int64 // counts the x outside [0, 1]
}

func (k bceKernel[T]) run(out []T, in eltIns[T]) {
	log, log1p := logOf[T](), log1pOf[T]()
	xs, ys := in[0], in[1][:len(in[0])]
	out = out[:len(xs)]
	n := 0
	for i, p := range xs {
		if !(p >= 0 && p <= 1) {
			n++
		}
		t := ys[i]
		out[i] = (t-1)*max(log1p(-p), bceLogClamp) - t*max(log(p), bceLogClamp)
	}
	if n > 0 {
		k.bad.Add(int64(n))
	}
}

// BinaryCrossEntropyBackward writes g·∂/∂wrt of BinaryCrossEntropy into dst: for x
// (ArgA) g·(x−y)/max(x·(1−x), 1e-12), for y (ArgB) −g·ln(x/(1−x)), PyTorch's −logit.
func BinaryCrossEntropyBackward(wrt kernels.Arg, dst, g, x, y Operand) {
	checkBinary(kernels.Sub, wrt)
	byType(bceBackward[float32], bceBackward[float64], dst.dt, g.dt, x.dt, y.dt)(wrt, dst, g, x, y)
}

func bceBackward[T float](wrt kernels.Arg, dst, g, x, y Operand) {
	elementwise("binary_cross_entropy backward", dst, []Operand{g, x, y}, bceGradKernel[T]{wrt})
}

type bceGradKernel[T float] struct{ wrt kernels.Arg }

func (k bceGradKernel[T]) run(out []T, in eltIns[T]) {
	log := logOf[T]()
	gs := in[0]
	xs, ys := in[1][:len(gs)], in[2][:len(gs)]
	out = out[:len(gs)]
	for i, gv := range gs {
		p := xs[i]
		if k.wrt == kernels.ArgA {
			out[i] = gv * (p - ys[i]) / max((1-p)*p, bceEps)
		} else {
			out[i] = -gv * log(p/(1-p))
		}
	}
}

// logSigmoidOf returns ln σ(v) = min(v, 0) − ln(1 + e^−|v|), finite for every finite
// v, and sigmoidOf σ(v), in T.
func logSigmoidOf[T float]() func(T) T {
	log1p, exp := log1pOf[T](), expOf[T]()
	return func(v T) T { return min(v, 0) - log1p(exp(-abs(v))) }
}

func sigmoidOf[T float]() func(T) T {
	exp := expOf[T]()
	return func(v T) T { return 1 / (1 + exp(-v)) }
}

// BinaryCrossEntropyWithLogits writes (1−y)·x − (1+(pw−1)·y)·ln σ(x) into dst, the
// binary cross-entropy of σ(x) against y with the positive term weighted by pw (a
// scalar 1 for none).
func BinaryCrossEntropyWithLogits(dst, x, y, pw Operand) {
	byType(bceLogits[float32], bceLogits[float64], dst.dt, x.dt, y.dt, pw.dt)(dst, x, y, pw)
}

func bceLogits[T float](dst, x, y, pw Operand) {
	elementwise("binary_cross_entropy_with_logits", dst, []Operand{x, y, pw}, bceLogitsKernel[T]{})
}

type bceLogitsKernel[T float] struct{}

func (bceLogitsKernel[T]) run(out []T, in eltIns[T]) {
	logSigmoid := logSigmoidOf[T]()
	xs := in[0]
	ys, ws := in[1][:len(xs)], in[2][:len(xs)]
	out = out[:len(xs)]
	for i, v := range xs {
		t := ys[i]
		out[i] = (1-t)*v - ((ws[i]-1)*t+1)*logSigmoid(v)
	}
}

// BinaryCrossEntropyWithLogitsBackward writes g·∂/∂wrt of BinaryCrossEntropyWithLogits
// into dst: for x (ArgA) g·((1+(pw−1)·y)·σ(x) − pw·y), for y (ArgB)
// g·(ln σ(−x) − pw·ln σ(x)).
func BinaryCrossEntropyWithLogitsBackward(wrt kernels.Arg, dst, g, x, y, pw Operand) {
	checkBinary(kernels.Sub, wrt)
	byType(bceLogitsBackward[float32], bceLogitsBackward[float64], dst.dt, g.dt, x.dt, y.dt, pw.dt)(wrt, dst, g, x, y, pw)
}

func bceLogitsBackward[T float](wrt kernels.Arg, dst, g, x, y, pw Operand) {
	const op = "binary_cross_entropy_with_logits backward"
	if wrt == kernels.ArgB {
		elementwise(op, dst, []Operand{g, x, pw}, bceLogitsTargetGradKernel[T]{})
		return
	}
	// The input gradient reads four operands, one more than an elementwise pass takes:
	// the factor of g goes into a buffer of the computing type first (dst itself when
	// it has that type), then g multiplies it into dst.
	buf := dst
	if dst.dt != native[T]() {
		buf = newOperand(native[T](), make([]T, dst.Size()), kernels.Contiguous(dst.Shape...))
	}
	elementwise(op, buf, []Operand{x, y, pw}, bceLogitsInputGradKernel[T]{})
	Binary(kernels.Mul, dst, buf, g)
}

// bceLogitsTargetGradKernel is the gradient for y: g·(ln σ(−x) − pw·ln σ(x)).
type bceLogitsTargetGradKernel[T float] struct{}

func (bceLogitsTargetGradKernel[T]) run(out []T, in eltIns[T]) {
	logSigmoid := logSigmoidOf[T]()
	gs := in[0]
	xs, ws := in[1][:len(gs)], in[2][:len(gs)]
	out = out[:len(gs)]
	for i, gv := range gs {
		out[i] = gv * (logSigmoid(-xs[i]) - ws[i]*logSigmoid(xs[i]))
	}
}

// bceLogitsInputGradKernel is the factor of g in the gradient for x.
type bceLogitsInputGradKernel[T float] struct{}

func (bceLogitsInputGradKernel[T]) run(out []T, in eltIns[T]) {
	sigmoid := sigmoidOf[T]()
	xs := in[0]
	ys, ws := in[1][:len(xs)], in[2][:len(xs)]
	out = out[:len(xs)]
	for i, v := range xs {
		t := ys[i]
		out[i] = ((ws[i]-1)*t+1)*sigmoid(v) - ws[i]*t
	}
}

func (*Backend) BinaryCrossEntropy(dst, x, y kernels.Operand) error {
	if n := BinaryCrossEntropy(operand(dst), operandIn(x, dst.DType), operandIn(y, dst.DType)); n > 0 {
		return &kernels.RangeError{Op: "binary_cross_entropy", Count: n, Lo: 0, Hi: 1}
	}
	return nil
}

func (*Backend) BinaryCrossEntropyBackward(wrt kernels.Arg, dst, g, x, y kernels.Operand) {
	BinaryCrossEntropyBackward(wrt, operand(dst), operandIn(g, dst.DType), operandIn(x, dst.DType), operandIn(y, dst.DType))
}

func (*Backend) BinaryCrossEntropyWithLogits(dst, x, y, pw kernels.Operand) {
	BinaryCrossEntropyWithLogits(operand(dst), operandIn(x, dst.DType), operandIn(y, dst.DType), posWeight(pw, dst.DType))
}

func (*Backend) BinaryCrossEntropyWithLogitsBackward(wrt kernels.Arg, dst, g, x, y, pw kernels.Operand) {
	BinaryCrossEntropyWithLogitsBackward(wrt, operand(dst), operandIn(g, dst.DType), operandIn(x, dst.DType), operandIn(y, dst.DType), posWeight(pw, dst.DType))
}

// posWeight is pw's operand (a Scalar read as dt's type), or a scalar 1 for an absent
// one (no weighting).
func posWeight(pw kernels.Operand, dt dtype.DType) Operand {
	if pw.Absent() {
		return F32([]float32{1}, kernels.Layout{})
	}
	return operandIn(pw, dt)
}
