// Package ref holds the float64 definitions of the elementwise ops and their gradients
// (PyTorch's, as kernels/ops.go states them) that the tests of every backend hold a
// kernel to: written from the definitions, not from any backend's code, and imported
// by kernelstest's conformance suite and by kernels/cpu's own tests alike (it imports
// no backend, so kernels/cpu's package tests may use it).
package ref

import (
	"math"

	"github.com/subletml/sublet/kernels"
)

// Unary is op(x).
func Unary(op kernels.UnaryOp, x float64) float64 {
	switch op {
	case kernels.Neg:
		return -x
	case kernels.Abs:
		return math.Abs(x)
	case kernels.Exp:
		return math.Exp(x)
	case kernels.Log:
		return math.Log(x)
	case kernels.Sqrt:
		return math.Sqrt(x)
	case kernels.Tanh:
		return math.Tanh(x)
	case kernels.Sigmoid:
		return 1 / (1 + math.Exp(-x))
	case kernels.Relu:
		return math.Max(x, 0)
	case kernels.GeluTanh:
		return x / 2 * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	case kernels.GeluErf:
		return x / 2 * (1 + math.Erf(x/math.Sqrt2))
	}
	panic(op)
}

// UnaryGrad is g·op'(x), where y = op(x) as the kernel is given it (an op that saves
// its output, op.SavesOutput, differentiates from y, which a test may have rounded to
// the saved tensor's type). Abs's derivative at 0 is 0 (PyTorch's sgn).
func UnaryGrad(op kernels.UnaryOp, g, x, y float64) float64 {
	switch op {
	case kernels.Neg:
		return -g
	case kernels.Abs:
		switch {
		case x > 0:
			return g
		case x < 0:
			return -g
		}
		return 0
	case kernels.Exp:
		return g * y
	case kernels.Log:
		return g / x
	case kernels.Sqrt:
		return g / (2 * y)
	case kernels.Tanh:
		return g * (1 - y*y)
	case kernels.Sigmoid:
		return g * y * (1 - y)
	case kernels.Relu:
		if y <= 0 {
			return 0
		}
		return g
	case kernels.GeluTanh:
		c := math.Sqrt(2 / math.Pi)
		t := math.Tanh(c * (x + 0.044715*x*x*x))
		return g * (0.5*(1+t) + 0.5*x*(1-t*t)*c*(1+3*0.044715*x*x))
	case kernels.GeluErf:
		return g * (0.5*(1+math.Erf(x/math.Sqrt2)) + x*math.Exp(-x*x/2)/math.Sqrt(2*math.Pi))
	}
	panic(op)
}

// Binary is op(a, b).
func Binary(op kernels.BinaryOp, a, b float64) float64 {
	switch op {
	case kernels.Add:
		return a + b
	case kernels.Sub:
		return a - b
	case kernels.Mul:
		return a * b
	case kernels.Div:
		return a / b
	case kernels.Pow:
		return math.Pow(a, b)
	case kernels.Maximum:
		return math.Max(a, b)
	case kernels.Minimum:
		return math.Min(a, b)
	}
	panic(op)
}

// BinaryGrad is g·∂op(a,b)/∂wrt; a tie of Maximum or Minimum shares g equally.
func BinaryGrad(op kernels.BinaryOp, wrt kernels.Arg, g, a, b float64) float64 {
	wa := wrt == kernels.ArgA
	switch op {
	case kernels.Add:
		return g
	case kernels.Sub:
		if wa {
			return g
		}
		return -g
	case kernels.Mul:
		if wa {
			return g * b
		}
		return g * a
	case kernels.Div:
		if wa {
			return g / b
		}
		return -g * a / (b * b)
	case kernels.Pow:
		if wa {
			return g * b * math.Pow(a, b-1)
		}
		return g * math.Pow(a, b) * math.Log(a)
	case kernels.Maximum, kernels.Minimum:
		p, q := a, b
		if !wa {
			p, q = b, a
		}
		if op == kernels.Minimum {
			p, q = -p, -q
		}
		switch {
		case p > q:
			return g
		case p == q:
			return g / 2
		}
		return 0
	}
	panic(op)
}
