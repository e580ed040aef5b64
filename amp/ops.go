package amp

import "github.com/subletml/sublet/tensor"

// class is what autocast does to an op's floating inputs.
type class uint8

const (
	// unlisted ops run in the types their inputs have. Every tensor op with several
	// inputs promotes them itself (an F16 and an F32 operand give F32), which is
	// PyTorch's rule for ops outside its lists, and also what its "promote" list
	// (addcmul, dot, cat on the CPU, …) does; so no op needs a promote class here.
	unlisted class = iota
	// lower ops cast every floating input to the autocast type (F16 or BF16): the
	// products, which gain the most speed and, saving low-precision inputs, memory.
	lower
	// fp32 ops cast every floating input to F32: ops whose range or accuracy suffers
	// in 16 bits (PyTorch's "fp32").
	fp32
	// fp32Out ops make an F32 result from a floating input read as it is, with no F32
	// copy of it (PyTorch's "fp32_set_opt_dtype": the op's dtype argument set to
	// float32). tensor asks through AutocastOutput; an explicit type (SumAs,
	// SoftmaxAs, …) is kept.
	fp32Out
)

// classOf maps tensor's op names onto PyTorch's CUDA autocast lists (spec §3.1), applied
// on every device. Ops of those lists that tensor does not have (convolutions, norms,
// cumulative sums, most losses, …) have no case; neither have the ops PyTorch leaves
// unlisted (Add, Relu, Mean, Max, Dropout, Embedding, views, Concat, …).
func classOf(op string) class {
	switch op {
	// lower_precision_fp: matmul, mm, linear (and the rest of the product family).
	case tensor.OpMatMul, tensor.OpLinear:
		return lower
	// fp32: exp, log, pow (Tensor_Tensor and Tensor_Scalar), layer_norm, mse_loss,
	// and cross_entropy, which PyTorch composes of log_softmax (fp32 output) and
	// nll_loss (fp32).
	case tensor.OpExp, tensor.OpLog, tensor.OpPow, tensor.OpPowScalar, tensor.OpLayerNorm,
		tensor.OpMSE, tensor.OpCrossEntropy:
		return fp32
	// fp32_set_opt_dtype: softmax, log_softmax, sum (SumKeep too; SumTo is a sum to a
	// shape).
	case tensor.OpSoftmax, tensor.OpLogSoftmax, tensor.OpSum, tensor.OpSumTo:
		return fp32Out
	}
	return unlisted
}
