package cpu

import (
	"fmt"

	"github.com/subletml/sublet/kernels"
)

// checkBinary panics, before any goroutine starts, on an op or Arg kernels does not
// define.
func checkBinary(op kernels.BinaryOp, wrt kernels.Arg) {
	if !op.Valid() || !wrt.Valid() {
		panic(fmt.Sprintf("kernels/cpu: unknown %v or argument %d", op, wrt))
	}
}

// Binary writes op(a, b) into dst. a and b broadcast to dst's shape; dst may be a or b
// itself (same buffer and layout) but must not otherwise overlap them.
func Binary(op kernels.BinaryOp, dst, a, b Operand) {
	checkBinary(op, kernels.ArgA)
	byType(binary[float32], binary[float64], dst.dt, a.dt, b.dt)(op, dst, a, b)
}

func binary[T float](op kernels.BinaryOp, dst, a, b Operand) {
	elementwise(op.String(), dst, []Operand{a, b}, binaryKernel[T]{op})
}

type binaryKernel[T float] struct{ op kernels.BinaryOp }

func (k binaryKernel[T]) run(out []T, in eltIns[T]) { binaryRun(k.op, out, in[0], in[1]) }

// BinaryBackward writes g·∂op(a,b)/∂wrt into dst, elementwise over dst's shape, which
// is the shape of op's output. g, a and b broadcast to it. When the operand wrt was
// broadcast in the forward op, reduce dst to its shape with Sum. dst may be g itself.
// At ties Maximum and Minimum give each side half the gradient.
func BinaryBackward(op kernels.BinaryOp, wrt kernels.Arg, dst, g, a, b Operand) {
	checkBinary(op, wrt)
	byType(binaryBackward[float32], binaryBackward[float64], dst.dt, g.dt, a.dt, b.dt)(op, wrt, dst, g, a, b)
}

func binaryBackward[T float](op kernels.BinaryOp, wrt kernels.Arg, dst, g, a, b Operand) {
	elementwise(binaryBackwardNames[op], dst, []Operand{g, a, b}, binaryGradKernel[T]{op, wrt})
}

type binaryGradKernel[T float] struct {
	op  kernels.BinaryOp
	wrt kernels.Arg
}

func (k binaryGradKernel[T]) run(out []T, in eltIns[T]) {
	binaryGradRun(k.op, k.wrt, out, in[0], in[1], in[2])
}

// binaryBackwardNames name the backward kernels of the binary ops in messages.
var binaryBackwardNames = func() (n [kernels.Minimum + 1]string) {
	for op := kernels.Add; op <= kernels.Minimum; op++ {
		n[op] = op.String() + " backward"
	}
	return n
}()

func binaryRun[T float](op kernels.BinaryOp, dst, a, b []T) {
	dst, b = dst[:len(a)], b[:len(a)]
	if i := binaryVector(op, dst, a, b); i > 0 {
		dst, a, b = dst[i:], a[i:], b[i:]
	}
	switch op {
	case kernels.Add:
		zipRun(dst, a, b, func(x, y T) T { return x + y })
	case kernels.Sub:
		zipRun(dst, a, b, func(x, y T) T { return x - y })
	case kernels.Mul:
		zipRun(dst, a, b, func(x, y T) T { return x * y })
	case kernels.Div:
		zipRun(dst, a, b, func(x, y T) T { return x / y })
	case kernels.Pow:
		zipRun(dst, a, b, powOf[T]())
	case kernels.Maximum:
		zipRun(dst, a, b, func(x, y T) T { return max(x, y) })
	case kernels.Minimum:
		zipRun(dst, a, b, func(x, y T) T { return min(x, y) })
	default:
		panic(fmt.Sprintf("kernels/cpu: unknown %v", op))
	}
}

func binaryGradRun[T float](op kernels.BinaryOp, wrt kernels.Arg, dst, g, a, b []T) {
	pow, log := powOf[T](), logOf[T]()
	dst = dst[:len(g)]
	a = a[:len(g)]
	b = b[:len(g)]
	switch {
	case op == kernels.Add, op == kernels.Sub && wrt == kernels.ArgA:
		copy(dst, g)
	case op == kernels.Sub:
		for i, gv := range g {
			dst[i] = -gv
		}
	case op == kernels.Mul && wrt == kernels.ArgA:
		for i, gv := range g {
			dst[i] = gv * b[i]
		}
	case op == kernels.Mul:
		for i, gv := range g {
			dst[i] = gv * a[i]
		}
	case op == kernels.Div && wrt == kernels.ArgA:
		for i, gv := range g {
			dst[i] = gv / b[i]
		}
	case op == kernels.Div:
		for i, gv := range g {
			dst[i] = -gv * a[i] / (b[i] * b[i])
		}
	case op == kernels.Pow && wrt == kernels.ArgA:
		for i, gv := range g {
			if b[i] == 0 {
				dst[i] = 0 * gv
				continue
			}
			dst[i] = gv * b[i] * pow(a[i], b[i]-1)
		}
	case op == kernels.Pow:
		for i, gv := range g {
			if a[i] == 0 && b[i] >= 0 {
				dst[i] = 0 * gv
				continue
			}
			dst[i] = gv * pow(a[i], b[i]) * log(a[i])
		}
	case op == kernels.Maximum || op == kernels.Minimum:
		// p is the operand wrt, oriented so that it wins when p > q.
		p, q := a, b
		if (op == kernels.Maximum) != (wrt == kernels.ArgA) {
			p, q = b, a
		}
		for i, gv := range g {
			switch {
			case p[i] > q[i]:
				dst[i] = gv
			case p[i] == q[i]:
				dst[i] = gv / 2
			case p[i] < q[i]:
				dst[i] = 0
			default: // a NaN input gets a NaN gradient
				dst[i] = p[i] + q[i]
			}
		}
	default:
		panic(fmt.Sprintf("kernels/cpu: unknown %v", op))
	}
}
