package tensor

import "github.com/subletml/sublet/dtype"

// Autocast is the hook through which a mixed-precision policy (package amp) changes the
// element type ops compute in. It is a scope mode (WithAutocast). Before an op runs in
// such a scope, Inputs receives the scope the op runs in (whose other modes, inference
// mode say, the policy may follow), the op's name (the Op* constants) and its tensor
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
	Inputs(s *Scope, op string, in []*Tensor, cast func(t *Tensor, dt dtype.DType) *Tensor) []*Tensor
}

// AutocastOutput is an optional interface of an Autocast policy: PyTorch's
// fp32_set_opt_dtype, by which an op makes a wider result from a 16-bit input without
// a wide copy of the input. The ops that take the type of their result (Sum, SumKeep,
// SumTo, Softmax, LogSoftmax) ask OutputType first, with their name and their input.
// When it returns ok, the op computes a result of type dt (floating) reading its input
// as it is (F16 and BF16 convert to F32 exactly as the kernels read them; an input dt
// does not hold exactly is cast to dt first), and Inputs is not called for the op.
// The gradient comes back in the input's type. When it returns false, or the policy
// does not implement it, Inputs is called as for any op. The explicit forms (SumAs,
// SumKeepAs, SoftmaxAs, LogSoftmaxAs) ask neither: an explicit type is kept.
type AutocastOutput interface {
	OutputType(op string, in []*Tensor) (dt dtype.DType, ok bool)
}

// Op names, as ops report them in errors, to Autocast policies and in graph nodes;
// each has a row in the op table (ops.go).
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
	OpNorm         = "Norm"
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
