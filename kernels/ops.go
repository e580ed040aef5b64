package kernels

import "fmt"

// UnaryOp names an elementwise function of one tensor.
type UnaryOp uint8

const (
	Neg      UnaryOp = iota + 1 // -x
	Abs                         // |x|; gradient 0 at 0
	Exp                         // e^x
	Log                         // ln x
	Sqrt                        // √x
	Tanh                        // tanh x
	Sigmoid                     // 1/(1+e^-x)
	Relu                        // max(x, 0); gradient 0 at 0
	GeluTanh                    // x/2·(1+tanh(√(2/π)(x+0.044715x³)))
	GeluErf                     // x/2·(1+erf(x/√2))
)

func (op UnaryOp) String() string {
	switch op {
	case Neg:
		return "neg"
	case Abs:
		return "abs"
	case Exp:
		return "exp"
	case Log:
		return "log"
	case Sqrt:
		return "sqrt"
	case Tanh:
		return "tanh"
	case Sigmoid:
		return "sigmoid"
	case Relu:
		return "relu"
	case GeluTanh:
		return "gelu_tanh"
	case GeluErf:
		return "gelu"
	}
	return fmt.Sprintf("kernels.UnaryOp(%d)", uint8(op))
}

// Valid reports whether op is one of the UnaryOps above.
func (op UnaryOp) Valid() bool { return op >= Neg && op <= GeluErf }

// SavesOutput reports which tensor the backward kernel needs besides the gradient: the
// output y (true) or the input x (false). Neg needs neither.
func (op UnaryOp) SavesOutput() bool {
	switch op {
	case Exp, Sqrt, Tanh, Sigmoid, Relu:
		return true
	}
	return false
}

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
	return fmt.Sprintf("kernels.BinaryOp(%d)", uint8(op))
}

// Valid reports whether op is one of the BinaryOps above.
func (op BinaryOp) Valid() bool { return op >= Add && op <= Minimum }

// Arg picks an operand of a binary op for its backward kernel.
type Arg uint8

const (
	ArgA Arg = iota // the left operand a
	ArgB            // the right operand b
)

// Valid reports whether a is ArgA or ArgB.
func (a Arg) Valid() bool { return a <= ArgB }
