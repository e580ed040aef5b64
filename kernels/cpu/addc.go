package cpu

import (
	"fmt"

	"github.com/subletml/sublet/kernels"
)

// Addc writes x + (value·a)·b (op Mul: addcmul) or x + (value·a)/b (op Div: addcdiv)
// into dst, elementwise in PyTorch's order, in float64 when an operand is F64 and in
// float32 otherwise. x, a and b broadcast to dst's shape; dst may be x itself.
func Addc(op kernels.BinaryOp, dst, x, a, b Operand, value float64) {
	if op != kernels.Mul && op != kernels.Div {
		panic(fmt.Sprintf("kernels/cpu: addc of %v; it takes mul or div", op))
	}
	byType(addc[float32], addc[float64], dst.dt, x.dt, a.dt, b.dt)(op, dst, x, a, b, value)
}

func addc[T float](op kernels.BinaryOp, dst, x, a, b Operand, value float64) {
	name := "addcdiv"
	if op == kernels.Mul {
		name = "addcmul"
	}
	elementwise(name, dst, []Operand{x, a, b}, addcKernel[T]{op, T(value)})
}

type addcKernel[T float] struct {
	op kernels.BinaryOp
	v  T
}

func (k addcKernel[T]) run(out []T, in eltIns[T]) {
	xs, v := in[0], k.v
	as, bs := in[1][:len(xs)], in[2][:len(xs)]
	out = out[:len(xs)]
	if k.op == kernels.Mul {
		for i, s := range xs {
			out[i] = s + T(v*as[i]*bs[i]) // the conversion rounds: no fused multiply-add
		}
		return
	}
	for i, s := range xs {
		out[i] = s + T(v*as[i]/bs[i])
	}
}

func (*Backend) Addc(op kernels.BinaryOp, dst, x, a, b kernels.Operand, value float64) {
	Addc(op, operand(dst), operandIn(x, dst.DType), operandIn(a, dst.DType), operandIn(b, dst.DType), value)
}
