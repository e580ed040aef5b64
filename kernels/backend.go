package kernels

// Backend computes the tensor package's ops on one kind of memory. tensor picks one per
// op from where its storage lives (device.Residency): the CPU kernels (package
// kernels/cpu) for host memory, Meta for a device that keeps no data, a GPU backend for
// device memory. Every method has the contract of the kernels/cpu function of the same
// name; the doc comments here say what every backend must do.
//
// Operands: outputs come first; every output is written whole. Inputs broadcast to the
// output's shape by numpy rules where a method says so; the row kernels (softmax, layer
// norm, losses, embedding, optimizer steps) take contiguous float operands of one type,
// F32 or F64, which is the type they compute in (I64 for labels and indices), from
// their first element. Softmax, LogSoftmax, their backward, LayerNorm, its backward,
// CrossEntropy and its backward also take their row operands (softmax's x, dst, g, y,
// dx; layer norm's x, y, w, b, g, dx; the logits and dlogits) stored as F16 or BF16,
// one of them for all the row operands of a call: they compute in float32 and round
// each output once to that type, the bits of converting the operands to F32 exactly,
// running the F32 call and converting its outputs back; their statistics (mean, rstd,
// lse) and dw, db are then F32. An elementwise output may be the very same memory as an input
// (same Mem, same Layout), never otherwise overlap it. An output with no elements
// writes nothing. Absent operands (the zero Operand) stand for what a method calls
// optional.
//
// Precision: the elementwise, copy, reduction and matmul kernels compute in float64
// when an operand is F64 (a Scalar does not count) and in float32 otherwise (F16 and
// BF16 are read as float32), and round each output once to its type; an F64 value
// never goes through float32. Number arguments (alpha, eps, p, inv, the optimizers'
// hyper-parameters) are float64 and rounded to the type the kernel computes in.
//
// Errors: misuse (shapes that do not agree, layouts outside their block) is the
// caller's bug and panics before anything is written. An index out of range, which
// depends on the data, is a *IndexError, and a value outside an op's domain a
// *RangeError: a synchronous backend returns it from the call (an IndexError before
// writing anything); an asynchronous one (Async) may return nil and report it at the
// next synchronisation. Methods that return a value (NonFinite) synchronise.
//
// Determinism: the same inputs give the same bits on every run.
type Backend interface {
	// Name says which backend this is: "cpu", "meta", "cuda".
	Name() string

	// Unary writes op(x) into dst.
	Unary(op UnaryOp, dst, x Operand)
	// UnaryBackward writes the gradient of op's input into dx from the output's
	// gradient g and saved: op's output when op.SavesOutput(), its input otherwise
	// (anything for Neg).
	UnaryBackward(op UnaryOp, dx, g, saved Operand)
	// Binary writes op(a, b) into dst; a or b may be a Scalar.
	Binary(op BinaryOp, dst, a, b Operand)
	// BinaryBackward writes g·∂op(a,b)/∂wrt into dst (the output's shape); a or b may be
	// a Scalar, or absent where the derivative does not read it.
	BinaryBackward(op BinaryOp, wrt Arg, dst, g, a, b Operand)
	// Copy converts src (any type, broadcast) into dst (any type and layout).
	Copy(dst, src Operand)
	// Fill sets every element of dst to v, converted to dst's type.
	Fill(dst Operand, v float64)
	// Axpy adds alpha·x (broadcast) into dst in place.
	Axpy(dst Operand, alpha float64, x Operand)
	// DropoutMask fills the contiguous Bool mask with 0 (probability p) or 1, element i
	// from word i%4 of Philox4x32-10 at counter i/4 under the key seed (see
	// kernels/cpu.DropoutMask): the same mask on every backend.
	DropoutMask(mask Operand, p float64, seed uint64)
	// Dropout writes x·mask/(1-p) into dst (0 where the Bool mask is 0).
	Dropout(dst, x, mask Operand, p float64)

	// Sum writes into dst the sum of src over the dimensions where dst has size 1 or
	// is missing; Mean the mean. dst is floating (src of any type, read as numbers), or
	// for Sum I64 with an integer or Bool src: the exact sum, wrapping as int64 does.
	Sum(dst, src Operand)
	Mean(dst, src Operand)
	// SumSquares is Sum of the squares of src's elements, each squared in the type Sum
	// reads it in (float32, or float64 when dst or src is F64) and summed as Sum sums
	// src's elements, in the same order: x·x then Sum in one pass. dst is floating.
	SumSquares(dst, src Operand)
	// Max writes into dst (optional) the largest element of src over the one dimension
	// where idx has size 1 (NaN wins), and its first position along it into the
	// contiguous I64 idx, which has dst's shape.
	Max(dst, idx, src Operand)
	// MaxBackward writes g (dst's shape of Max) into dx at the positions idx, zero
	// elsewhere.
	MaxBackward(dx, g, idx Operand)

	// Matmul writes a·b into dst ([batch..., m, n]) for a [batch..., m, k] and b
	// [batch..., k, n], batch dimensions broadcast; strided (transposed) operands are
	// read in place. k may be 0 (dst becomes 0).
	Matmul(dst, a, b Operand)

	// Softmax writes softmax (LogSoftmax: log-softmax) of x along the middle of
	// [outer, n, inner] into dst; dst may be x.
	Softmax(dst, x Operand, outer, n, inner int)
	LogSoftmax(dst, x Operand, outer, n, inner int)
	// SoftmaxBackward writes the input gradient dx from the output's gradient g and
	// the output y; LogSoftmaxBackward likewise for LogSoftmax.
	SoftmaxBackward(dx, g, y Operand, outer, n, inner int)
	LogSoftmaxBackward(dx, g, y Operand, outer, n, inner int)
	// LayerNorm normalises each of rows rows of n elements of x into y, keeping the
	// row's mean and reciprocal deviation; w and b ([n]) are optional.
	LayerNorm(y, mean, rstd, x, w, b Operand, rows, n int, eps float64)
	// LayerNormBackward writes the gradients dx, dw and db (each optional).
	LayerNormBackward(dx, dw, db, g, x, mean, rstd, w Operand, rows, n int)
	// CrossEntropy writes into the scalar loss (of any floating type) the mean over the
	// rows of logits [n, c] whose label is not ignore of -log softmax(row)[label], and
	// into lse (n+1 elements) each row's log-sum-exp, then the number of rows that
	// count (labels not ignore) rounded to lse's type.
	CrossEntropy(loss, lse, logits, labels Operand, n, c int, ignore int64) error
	// CrossEntropyBackward writes the logits' gradient for the output's gradient g (a
	// floating scalar of any type) from the lse CrossEntropy wrote: g rounded to the
	// compute type, divided by lse[n], scales each counted row.
	CrossEntropyBackward(dlogits, logits, lse, labels, g Operand, n, c int, ignore int64)
	// MSE writes the mean of (a-b)² into the scalar loss (of any floating type).
	MSE(loss, a, b Operand)
	// MSEBackward writes the gradients da and db (each optional) for the floating
	// scalar g.
	MSEBackward(da, db, a, b, g Operand)
	// Embedding gathers the rows idx of the table w (rows of dim) into dst.
	Embedding(dst, w, idx Operand, dim int) error
	// EmbeddingBackward adds the rows of g into the rows idx of dw.
	EmbeddingBackward(dw, g, idx Operand, dim int) error

	// SGD updates p in place from its gradient g and momentum buffer buf (absent
	// without momentum); first sets buf to the gradient, as PyTorch does.
	SGD(c SGD, p, g, buf Operand, first bool)
	// Adam runs update number step (from 1) on p in place with the moments m and v.
	Adam(c Adam, step int, p, g, m, v Operand)
	// Unscale multiplies the floating g by inv in place and sets the F32 scalar found to
	// 1 when g holds an Inf or a NaN (it is left as it was otherwise): PyTorch's
	// _amp_foreach_non_finite_check_and_unscale_.
	Unscale(g Operand, inv float64, found Operand)
	// SGDMulti, AdamMulti and UnscaleMulti are SGD, Adam and Unscale over a list of
	// tensors at once (PyTorch's foreach and fused optimizers, its multi-tensor unscale):
	// element i of each slice is one call of the single-tensor method, and every
	// element gets the bits that call gives it, whatever the list holds besides. A GPU
	// backend updates the whole list in one launch per compute type where it can
	// (contiguous tensors on one stream) and falls back to the single-tensor kernels
	// for the rest. The slices have one length; each call's operands follow the
	// single-tensor method's contract.
	//
	// SGDMulti runs SGD(c, p[i], g[i], buf[i], first[i]); buf is nil or all absent
	// without momentum.
	SGDMulti(c SGD, p, g, buf []Operand, first []bool)
	// AdamMulti runs Adam(c, steps[i], p[i], g[i], m[i], v[i]).
	AdamMulti(c Adam, steps []int, p, g, m, v []Operand)
	// AdamMultiCapturable is AdamMulti with the learning rate and the step counts on
	// the device (PyTorch's capturable Adam), so that a step recorded in a CUDA graph
	// replays with the rate and the counts of the moment it replays: lr is a
	// one-element F64 operand holding the rate (c.LR is not read), steps an F64 vector
	// whose element slot[i] holds parameter i's updates so far. The call runs
	// Adam(c with LR lr, steps[slot[i]]+1, p[i], g[i], m[i], v[i]) for every i and adds
	// 1 to steps[slot[i]]: every element gets the bits AdamMulti gives it, the bias
	// corrections computed from the count as math.Pow computes them. The slots are
	// distinct; lr and steps are on the parameters' device.
	AdamMultiCapturable(c Adam, lr, steps Operand, slot []int, p, g, m, v []Operand)
	// UnscaleMulti runs Unscale(g[i], inv, found) for every i: found is set to 1 when
	// any gradient held an Inf or a NaN.
	UnscaleMulti(g []Operand, inv float64, found Operand)
	// NonFinite reports whether x holds an Inf or a NaN; it synchronises.
	NonFinite(x Operand) bool

	// BinaryCrossEntropy writes −(y·max(ln x, −100) + (1−y)·max(ln(1−x), −100)) into
	// dst, elementwise (x and y broadcast to dst). An x outside [0, 1], or NaN, is a
	// *RangeError (dst is then undefined).
	BinaryCrossEntropy(dst, x, y Operand) error
	// BinaryCrossEntropyBackward writes g·∂/∂wrt of it into dst: for x (ArgA)
	// g·(x−y)/max(x·(1−x), 1e-12), for y (ArgB) −g·ln(x/(1−x)).
	BinaryCrossEntropyBackward(wrt Arg, dst, g, x, y Operand)
	// BinaryCrossEntropyWithLogits writes (1−y)·x − (1+(pw−1)·y)·ln σ(x) into dst,
	// elementwise, with pw the optional positive weight (absent: 1).
	BinaryCrossEntropyWithLogits(dst, x, y, pw Operand)
	// BinaryCrossEntropyWithLogitsBackward writes g·∂/∂wrt of it into dst: for x
	// g·((1+(pw−1)·y)·σ(x) − pw·y), for y g·((pw−1)·softplus(−x) − x).
	BinaryCrossEntropyWithLogitsBackward(wrt Arg, dst, g, x, y, pw Operand)

	// Compare writes op(a, b) into the Bool dst, elementwise: a and b (of any types,
	// one of them may be a Scalar) broadcast to dst and are compared in
	// CompareType(a, b), each value rounded once to it (integers exactly as int64). A
	// NaN is equal to nothing: every op but Ne is false for it.
	Compare(op CompareOp, dst, a, b Operand)
	// Where writes a where the Bool cond is 1 and b where it is 0 into dst (cond, a and
	// b broadcast to dst; a or b may be a Scalar; dst may be a or b): a floating dst
	// takes the values read as Binary reads its operands and rounded once to dst's
	// type; an integer or Bool dst takes integer or Bool operands (a Scalar holding an
	// integer), converted as Copy converts integers.
	Where(dst, cond, a, b Operand)

	// Addc writes x + value·a·b (op Mul) or x + value·a/b (op Div) into dst,
	// elementwise, computed as x + (value·a)·b and x + (value·a)/b (x, a and b
	// broadcast to dst; dst may be x).
	Addc(op BinaryOp, dst, x, a, b Operand, value float64)
}

// BiasMatmul is implemented by a Backend that can fold a bias into a product (the
// CUDA backend, through cuBLASLt's epilogue): a Linear then writes its output once.
type BiasMatmul interface {
	// MatmulBias writes a·b + bias into dst (a [m, k], b [k, n], dst [m, n], the bias
	// [n] added to every row) in one pass and reports true, or reports false without
	// writing anything when it cannot for these operands: the caller then runs Matmul
	// and Binary. The bias is added in the product's compute type, before dst's one
	// rounding.
	MatmulBias(dst, a, b, bias Operand) bool
}

// BiasGradMatmul is implemented by a Backend that can sum a product's left operand over
// k in the product's pass (the CUDA backend, through cuBLASLt's BGRADB epilogue): a
// Linear's backward then gets its bias gradient from the weight gradient's product
// instead of a reduction of its own.
type BiasGradMatmul interface {
	// MatmulBiasGrad writes a·b into dst (a [m, k], b [k, n], dst [m, n]) and the sum
	// of each row of a into dbias ([m]), and reports true, or reports false without
	// writing anything when it cannot for these operands: the caller then runs Matmul
	// and Sum. The sums are in the product's compute type, rounded once to dbias's
	// type, in an order of the backend's (fixed for a shape: the same bits on every
	// run, not those of Sum).
	MatmulBiasGrad(dst, dbias, a, b Operand) bool
}

// ActivationMatmul is implemented by a Backend that can apply a Linear's ReLU in its
// product's pass (the CUDA backend, through cuBLASLt's RELU_BIAS epilogue): a Linear
// followed by ReLU then writes its output once, where Matmul, Binary and Unary write
// the product, read it back and write it twice more. It takes no other activation:
// GELU's epilogue measured slower than the product followed by Unary (kernels/cuda's
// MatmulActivation has the figures).
type ActivationMatmul interface {
	// MatmulActivation writes op(a·b + bias) into dst (a [m, k], b [k, n], dst [m, n],
	// the optional bias [n] added to every row) for op Relu and reports true; or
	// reports false without writing anything for another op or when it cannot for
	// these operands: the caller then runs Matmul, Binary (Add) and Unary. The bias is
	// added and the ReLU applied in the product's compute type before the one rounding
	// to dst's type; as ReLU commutes with that rounding, dst is Relu of the rounded
	// a·b + bias. One difference from Unary is allowed: ReLU of a NaN pre-activation
	// may be 0 (the hardware's max, which cuBLASLt's epilogue takes), where Relu keeps
	// the NaN.
	MatmulActivation(op UnaryOp, dst, a, b, bias Operand) bool
}

// DenseF32 is implemented by a Backend that computes on host memory: Unary and Binary
// over dense float32 slices of one length (dst, then the inputs, elementwise; no
// broadcasting), for a caller that holds its operands as such slices and so need not
// build operand descriptors for the backend to check (a small op's path: about a tenth
// of its host cost). Unary and Binary are their reference: the same results, bit for
// bit. Slices of different lengths panic.
type DenseF32 interface {
	UnaryF32(op UnaryOp, dst, x []float32)
	BinaryF32(op BinaryOp, dst, a, b []float32)
}

// Async is implemented by a Backend whose kernels run asynchronously on their device
// (the CUDA backend): its methods return before the kernels have run, so an error that
// depends on the data (an index out of range) or a device failure (a launch refused)
// cannot be returned by the op that caused it. Check returns those errors, each
// naming its op (*IndexError for indices), at the next synchronisation point: the
// tensor package calls it wherever it reads values back (ToSlice, Item) and in
// tensor.Synchronize.
type Async interface {
	Backend
	// Check returns the errors raised since the last Check, joined (nil when none),
	// waiting for the device first when a kernel that may raise one has run.
	Check() error
}
