package cpu

import (
	"fmt"

	"github.com/chewxy/math32"
)

// BinaryOp names an elementwise function of two tensors.
type BinaryOp uint8

const (
	Add     BinaryOp = iota + 1 // a + b
	Sub                         // a - b
	Mul                         // a · b
	Div                         // a / b
	Pow                         // a^b
	Maximum                     // max(a, b), NaN if either is NaN
	Minimum                     // min(a, b), NaN if either is NaN
)

func (op BinaryOp) String() string {
	switch op {
	case Add:
		return "add"
	case Sub:
		return "sub"
	case Mul:
		return "mul"
	case Div:
		return "div"
	case Pow:
		return "pow"
	case Maximum:
		return "maximum"
	case Minimum:
		return "minimum"
	}
	return fmt.Sprintf("cpu.BinaryOp(%d)", uint8(op))
}

// check panics, before any goroutine starts, on an op or Arg this package does not
// define.
func (op BinaryOp) check(wrt Arg) {
	if op < Add || op > Minimum || wrt > ArgB {
		panic(fmt.Sprintf("kernels/cpu: unknown %v or argument %d", op, wrt))
	}
}

// Arg picks an operand of a binary op for its backward kernel.
type Arg uint8

const (
	ArgA Arg = iota // the left operand a
	ArgB            // the right operand b
)

// Binary writes op(a, b) into dst. a and b broadcast to dst's shape; dst may be a or b
// itself (same buffer and layout) but must not otherwise overlap them.
func Binary(op BinaryOp, dst, a, b Operand) {
	op.check(ArgA)
	elementwise(op.String(), dst, []Operand{a, b}, func(out []float32, in [][]float32) {
		binaryRun(op, out, in[0], in[1])
	})
}

// BinaryBackward writes g·∂op(a,b)/∂wrt into dst, elementwise over dst's shape, which
// is the shape of op's output. g, a and b broadcast to it. When the operand wrt was
// broadcast in the forward op, reduce dst to its shape with Sum. dst may be g itself.
// At ties Maximum and Minimum give each side half the gradient.
func BinaryBackward(op BinaryOp, wrt Arg, dst, g, a, b Operand) {
	op.check(wrt)
	elementwise(op.String()+" backward", dst, []Operand{g, a, b}, func(out []float32, in [][]float32) {
		binaryGradRun(op, wrt, out, in[0], in[1], in[2])
	})
}

func binaryRun(op BinaryOp, dst, a, b []float32) {
	switch op {
	case Add:
		zipRun(dst, a, b, func(x, y float32) float32 { return x + y })
	case Sub:
		zipRun(dst, a, b, func(x, y float32) float32 { return x - y })
	case Mul:
		zipRun(dst, a, b, func(x, y float32) float32 { return x * y })
	case Div:
		zipRun(dst, a, b, func(x, y float32) float32 { return x / y })
	case Pow:
		zipRun(dst, a, b, math32.Pow)
	case Maximum:
		zipRun(dst, a, b, func(x, y float32) float32 { return max(x, y) })
	case Minimum:
		zipRun(dst, a, b, func(x, y float32) float32 { return min(x, y) })
	default:
		panic(fmt.Sprintf("kernels/cpu: unknown %v", op))
	}
}

func binaryGradRun(op BinaryOp, wrt Arg, dst, g, a, b []float32) {
	dst = dst[:len(g)]
	a = a[:len(g)]
	b = b[:len(g)]
	switch {
	case op == Add, op == Sub && wrt == ArgA:
		copy(dst, g)
	case op == Sub:
		for i, gv := range g {
			dst[i] = -gv
		}
	case op == Mul && wrt == ArgA:
		for i, gv := range g {
			dst[i] = gv * b[i]
		}
	case op == Mul:
		for i, gv := range g {
			dst[i] = gv * a[i]
		}
	case op == Div && wrt == ArgA:
		for i, gv := range g {
			dst[i] = gv / b[i]
		}
	case op == Div:
		for i, gv := range g {
			dst[i] = -gv * a[i] / (b[i] * b[i])
		}
	case op == Pow && wrt == ArgA:
		for i, gv := range g {
			if b[i] == 0 {
				dst[i] = 0 * gv
				continue
			}
			dst[i] = gv * b[i] * math32.Pow(a[i], b[i]-1)
		}
	case op == Pow:
		for i, gv := range g {
			if a[i] == 0 && b[i] >= 0 {
				dst[i] = 0 * gv
				continue
			}
			dst[i] = gv * math32.Pow(a[i], b[i]) * math32.Log(a[i])
		}
	case op == Maximum || op == Minimum:
		// p is the operand wrt, oriented so that it wins when p > q.
		p, q := a, b
		if (op == Maximum) != (wrt == ArgA) {
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
