package tensor

import (
	"errors"

	"github.com/subletml/sublet/kernels"
)

// AutocastClass is what an autocast policy (package amp) does to an op's floating
// inputs other than F64 (which autocast leaves alone): PyTorch's CUDA autocast lists,
// applied on every device.
type AutocastClass uint8

const (
	// AutocastNone ops run in the types their inputs have. Every op with several inputs
	// promotes them itself (an F16 and an F32 operand give F32), which is PyTorch's rule
	// for ops outside its lists and what its "promote" list does.
	AutocastNone AutocastClass = iota
	// AutocastLower ops cast every floating input to the autocast type (F16 or BF16):
	// the products, which gain the most speed and, saving low-precision inputs, memory
	// (PyTorch's lower_precision_fp).
	AutocastLower
	// AutocastF32 ops cast every floating input to F32: ops whose range or accuracy
	// suffers in 16 bits (PyTorch's fp32).
	AutocastF32
	// AutocastF32Out ops make an F32 result from a floating input read as it is, with
	// no F32 copy of it (PyTorch's fp32_set_opt_dtype); the explicit forms (SumAs,
	// SoftmaxAs, …) keep their type. The op asks through AutocastOutput.
	AutocastF32Out
	// AutocastBanned ops are refused in an enabled autocast scope: the policy panics
	// with AutocastBannedError (PyTorch's banned list: binary_cross_entropy, whose
	// 16-bit inputs lose what the logits form keeps).
	AutocastBanned
)

func (c AutocastClass) String() string {
	switch c {
	case AutocastLower:
		return "lower"
	case AutocastF32:
		return "fp32"
	case AutocastF32Out:
		return "fp32 result"
	case AutocastBanned:
		return "banned"
	}
	return "none"
}

// OpInfo is an op's row of the op table: what is true of the op besides its code.
// Adding an op means a row here, its method with the backward rule beside it, and, for
// a new kernel family, a kernels.Backend method.
type OpInfo struct {
	// Name is the op's name in errors, graph nodes and autocast policies (the Op*
	// constants). Gelu and GeluTanh share one name and differ only in their kernel.
	Name string
	// MinInputs and MaxInputs bound the number of tensor inputs (-1: no bound).
	MinInputs, MaxInputs int
	// Saves says what the op keeps for backward when it records.
	Saves string
	// Autocast is the op's class under an autocast policy.
	Autocast AutocastClass
	// Banned says, for an AutocastBanned op, why autocast refuses it and what to use
	// instead (PyTorch's message).
	Banned string
	// SavesExtra says the op saves a tensor it computes besides its result
	// (statistics, a mask, indices): an OpCache cannot answer it.
	SavesExtra bool

	// unary and binary are the kernels of the elementwise families.
	unary  kernels.UnaryOp
	binary kernels.BinaryOp
}

// The rows the elementwise methods run; the others are listed in opTable by name.
var (
	opNeg      = &OpInfo{Name: OpNeg, MinInputs: 1, MaxInputs: 1, Saves: "nothing", unary: kernels.Neg}
	opAbs      = &OpInfo{Name: OpAbs, MinInputs: 1, MaxInputs: 1, Saves: "its input", unary: kernels.Abs}
	opExp      = &OpInfo{Name: OpExp, MinInputs: 1, MaxInputs: 1, Saves: "its output", Autocast: AutocastF32, unary: kernels.Exp}
	opLog      = &OpInfo{Name: OpLog, MinInputs: 1, MaxInputs: 1, Saves: "its input", Autocast: AutocastF32, unary: kernels.Log}
	opSqrt     = &OpInfo{Name: OpSqrt, MinInputs: 1, MaxInputs: 1, Saves: "its output", unary: kernels.Sqrt}
	opTanh     = &OpInfo{Name: OpTanh, MinInputs: 1, MaxInputs: 1, Saves: "its output", unary: kernels.Tanh}
	opSigmoid  = &OpInfo{Name: OpSigmoid, MinInputs: 1, MaxInputs: 1, Saves: "its output", unary: kernels.Sigmoid}
	opRelu     = &OpInfo{Name: OpRelu, MinInputs: 1, MaxInputs: 1, Saves: "its output", unary: kernels.Relu}
	opGelu     = &OpInfo{Name: OpGelu, MinInputs: 1, MaxInputs: 1, Saves: "its input", unary: kernels.GeluErf}
	opGeluTanh = &OpInfo{Name: OpGelu, MinInputs: 1, MaxInputs: 1, Saves: "its input", unary: kernels.GeluTanh}

	opAdd     = &OpInfo{Name: OpAdd, MinInputs: 2, MaxInputs: 2, Saves: "nothing", binary: kernels.Add}
	opSub     = &OpInfo{Name: OpSub, MinInputs: 2, MaxInputs: 2, Saves: "nothing", binary: kernels.Sub}
	opMul     = &OpInfo{Name: OpMul, MinInputs: 2, MaxInputs: 2, Saves: "each input whose other input wants a gradient", binary: kernels.Mul}
	opDiv     = &OpInfo{Name: OpDiv, MinInputs: 2, MaxInputs: 2, Saves: "the divisor; the dividend when the divisor wants a gradient", binary: kernels.Div}
	opPow     = &OpInfo{Name: OpPow, MinInputs: 2, MaxInputs: 2, Saves: "both inputs", Autocast: AutocastF32, binary: kernels.Pow}
	opMaximum = &OpInfo{Name: OpMaximum, MinInputs: 2, MaxInputs: 2, Saves: "both inputs", binary: kernels.Maximum}
	opMinimum = &OpInfo{Name: OpMinimum, MinInputs: 2, MaxInputs: 2, Saves: "both inputs", binary: kernels.Minimum}

	opAddScalar = &OpInfo{Name: OpAddScalar, MinInputs: 1, MaxInputs: 1, Saves: "nothing", binary: kernels.Add}
	opMulScalar = &OpInfo{Name: OpMulScalar, MinInputs: 1, MaxInputs: 1, Saves: "nothing", binary: kernels.Mul}
	opPowScalar = &OpInfo{Name: OpPowScalar, MinInputs: 1, MaxInputs: 1, Saves: "its input", Autocast: AutocastF32, binary: kernels.Pow}
)

// opTable is every op, in the order the package doc lists them.
var opTable = []*OpInfo{
	opAdd, opSub, opMul, opDiv, opPow, opMaximum, opMinimum,
	opAddScalar, opMulScalar, opPowScalar,
	opNeg, opAbs, opExp, opLog, opSqrt, opTanh, opSigmoid, opRelu, opGelu, opGeluTanh,
	{Name: OpSum, MinInputs: 1, MaxInputs: 1, Saves: "nothing", Autocast: AutocastF32Out},
	{Name: OpMean, MinInputs: 1, MaxInputs: 1, Saves: "nothing"},
	{Name: OpMax, MinInputs: 1, MaxInputs: 1, Saves: "the I64 positions of the maxima", SavesExtra: true},
	{Name: OpNorm, MinInputs: 1, MaxInputs: 1, Saves: "its input and its output", Autocast: AutocastF32},
	{Name: OpSumTo, MinInputs: 1, MaxInputs: 1, Saves: "nothing", Autocast: AutocastF32Out},
	{Name: OpMatMul, MinInputs: 2, MaxInputs: 2, Saves: "a when b wants a gradient, b when a does", Autocast: AutocastLower},
	{Name: OpLinear, MinInputs: 2, MaxInputs: 3, Saves: "x when the weight wants a gradient, the weight when x does", Autocast: AutocastLower},
	opLinearRelu,
	{Name: OpSoftmax, MinInputs: 1, MaxInputs: 1, Saves: "its output", Autocast: AutocastF32Out},
	{Name: OpLogSoftmax, MinInputs: 1, MaxInputs: 1, Saves: "its output", Autocast: AutocastF32Out},
	{Name: OpCrossEntropy, MinInputs: 2, MaxInputs: 2, Saves: "the logits, the labels and one log-sum-exp per row", Autocast: AutocastF32, SavesExtra: true},
	{Name: OpMSE, MinInputs: 2, MaxInputs: 2, Saves: "both inputs", Autocast: AutocastF32},
	{Name: OpLayerNorm, MinInputs: 1, MaxInputs: 3, Saves: "x, the weight, and one mean and one reciprocal deviation per row", Autocast: AutocastF32, SavesExtra: true},
	{Name: OpEmbedding, MinInputs: 2, MaxInputs: 2, Saves: "the indices"},
	{Name: OpDropout, MinInputs: 1, MaxInputs: 1, Saves: "the mask, one byte per element", SavesExtra: true},
	{Name: OpCast, MinInputs: 1, MaxInputs: 1, Saves: "nothing"},
	{Name: OpTo, MinInputs: 1, MaxInputs: 1, Saves: "nothing"},
	{Name: OpContiguous, MinInputs: 1, MaxInputs: 1, Saves: "nothing"},
	{Name: OpReshape, MinInputs: 1, MaxInputs: 1, Saves: "nothing"},
	{Name: OpView, MinInputs: 1, MaxInputs: 1, Saves: "nothing"},
	{Name: OpTranspose, MinInputs: 1, MaxInputs: 1, Saves: "nothing"},
	{Name: OpPermute, MinInputs: 1, MaxInputs: 1, Saves: "nothing"},
	{Name: OpSlice, MinInputs: 1, MaxInputs: 1, Saves: "nothing"},
	{Name: OpExpand, MinInputs: 1, MaxInputs: 1, Saves: "nothing"},
	{Name: OpSqueeze, MinInputs: 1, MaxInputs: 1, Saves: "nothing"},
	{Name: OpUnsqueeze, MinInputs: 1, MaxInputs: 1, Saves: "nothing"},
	{Name: OpConcat, MinInputs: 1, MaxInputs: -1, Saves: "nothing"},
	{Name: OpStack, MinInputs: 1, MaxInputs: -1, Saves: "nothing"},
	{Name: OpDetach, MinInputs: 1, MaxInputs: 1, Saves: "nothing (it records no node)"},
	opBinaryCrossEntropy, opBinaryCrossEntropyWithLogits, opAddcmul, opAddcdiv,
	compareOps[kernels.Eq], compareOps[kernels.Ne], compareOps[kernels.Lt], compareOps[kernels.Le], compareOps[kernels.Gt],
	compareOps[kernels.Ge], opWhere, opMaskedFill,
}

// The rows of the ops whose method runs its row.
var (
	opBinaryCrossEntropy = &OpInfo{Name: OpBinaryCrossEntropy, MinInputs: 2, MaxInputs: 2, Saves: "the input and the target",
		Autocast: AutocastBanned, Banned: "tensor.BinaryCrossEntropy and nn.BCELoss are unsafe to autocast. " +
			"Many models use a sigmoid layer right before the binary cross entropy layer. " +
			"In this case, combine the two layers using tensor.BinaryCrossEntropyWithLogits or nn.BCEWithLogitsLoss. " +
			"BinaryCrossEntropyWithLogits and BCEWithLogitsLoss are safe to autocast"}
	opBinaryCrossEntropyWithLogits = &OpInfo{Name: OpBinaryCrossEntropyWithLogits, MinInputs: 2, MaxInputs: 3,
		Saves: "the logits, the target and the positive weight", Autocast: AutocastF32}
	// PyTorch's "promote" list: the op promotes its inputs itself.
	opAddcmul = &OpInfo{Name: OpAddcmul, MinInputs: 3, MaxInputs: 3, Saves: "b when a wants a gradient, a when b does",
		binary: kernels.Mul}
	opAddcdiv = &OpInfo{Name: OpAddcdiv, MinInputs: 3, MaxInputs: 3,
		Saves: "b when a or b wants a gradient, a when b does", binary: kernels.Div}
)

// ErrAutocastBanned is the cause of the error an autocast policy panics with for an
// op of class AutocastBanned.
var ErrAutocastBanned = errors.New("unsafe to autocast")

// AutocastBannedError is the error an enabled autocast policy panics with when asked
// for op, an AutocastBanned op: it names the op, says why and what to use instead, and
// wraps ErrAutocastBanned.
func AutocastBannedError(op string) *Error {
	e := &Error{Op: op, Msg: "the op is unsafe to autocast", Err: ErrAutocastBanned}
	if o, ok := opByName[op]; ok && o.Banned != "" {
		e.Msg = o.Banned
	}
	return e
}

// Ops returns the op table: a row for every op (one per method: Gelu and GeluTanh
// share a name).
func Ops() []OpInfo {
	out := make([]OpInfo, len(opTable))
	for i, o := range opTable {
		out[i] = *o
	}
	return out
}

// opByName indexes opTable by name (the first row of a shared name); built once, never
// changed.
var opByName = func() map[string]*OpInfo {
	m := make(map[string]*OpInfo, len(opTable))
	for _, o := range opTable {
		if _, ok := m[o.Name]; !ok {
			m[o.Name] = o
		}
	}
	return m
}()

// LookupOp returns the row of the op called name; ok is false for a name that is no op
// (a backward rule's name, say).
func LookupOp(name string) (info OpInfo, ok bool) {
	o, ok := opByName[name]
	if !ok {
		return OpInfo{}, false
	}
	return *o, true
}
