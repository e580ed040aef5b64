package tensor

import "github.com/subletml/sublet/dtype"

// Autocast is the hook through which a mixed-precision policy (package amp) changes the
// element type ops compute in. It is a scope mode (WithAutocast). Before an op runs in
// such a scope, Inputs receives the op's name (the Op* constants) and its tensor
// inputs, and returns the inputs the op uses instead: the same slice, or a slice of the
// same length where some floating inputs were replaced by cast(in[i], dt).
//
// cast is the Cast op run in the op's scope: it is recorded in the graph (so the op
// saves the cast input for backward, and the gradient is cast back), and its result
// belongs to the op's scope, also for a parameter input. Cast itself is never passed
// to the policy. The op only reads the inputs it gets back (and saves their data for
// backward): a policy that caches casts (of weights, say) keeps them in a scope of its
// own and may return them as they are or bound into the op's scope.
type Autocast interface {
	Inputs(op string, in []*Tensor, cast func(t *Tensor, dt dtype.DType) *Tensor) []*Tensor
}

// Op names, as ops report them in errors, to Autocast policies and in graph nodes.
const (
	OpAdd          = "Add"
	OpSub          = "Sub"
	OpMul          = "Mul"
	OpDiv          = "Div"
	OpPow          = "Pow"
	OpMaximum      = "Maximum"
	OpMinimum      = "Minimum"
	OpAddScalar    = "AddScalar"
	OpMulScalar    = "MulScalar"
	OpPowScalar    = "PowScalar"
	OpNeg          = "Neg"
	OpAbs          = "Abs"
	OpExp          = "Exp"
	OpLog          = "Log"
	OpSqrt         = "Sqrt"
	OpTanh         = "Tanh"
	OpSigmoid      = "Sigmoid"
	OpRelu         = "Relu"
	OpGelu         = "Gelu"
	OpSum          = "Sum"
	OpMean         = "Mean"
	OpMax          = "Max"
	OpSumTo        = "SumTo"
	OpMatMul       = "MatMul"
	OpLinear       = "Linear"
	OpSoftmax      = "Softmax"
	OpLogSoftmax   = "LogSoftmax"
	OpCrossEntropy = "CrossEntropy"
	OpMSE          = "MSE"
	OpLayerNorm    = "LayerNorm"
	OpEmbedding    = "Embedding"
	OpDropout      = "Dropout"
	OpCast         = "Cast"
	OpTo           = "To"
	OpContiguous   = "Contiguous"
	OpReshape      = "Reshape"
	OpView         = "View"
	OpTranspose    = "Transpose"
	OpPermute      = "Permute"
	OpSlice        = "Slice"
	OpExpand       = "Expand"
	OpSqueeze      = "Squeeze"
	OpUnsqueeze    = "Unsqueeze"
	OpConcat       = "Concat"
	OpStack        = "Stack"
	OpDetach       = "Detach"
)
