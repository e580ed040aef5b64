package cpu

import (
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// Backend is this package's kernels as a kernels.Backend over host memory (the Host
// bytes of each operand's Mem): what the tensor package runs on cpu and on a simulated
// device with a backing store. It is immutable and safe for concurrent use.
type Backend struct {
	gemm Gemm // the float32 GEMM Matmul hands unit-stride products to
}

// NewBackend returns the CPU backend with gemm for float32 products (nil: Builtin; a
// system BLAS from kernels/cpu/blas otherwise).
func NewBackend(gemm Gemm) *Backend {
	if gemm == nil {
		gemm = Builtin()
	}
	return &Backend{gemm: gemm}
}

var (
	_ kernels.Backend  = (*Backend)(nil)
	_ kernels.DenseF32 = (*Backend)(nil)
)

// Name is "cpu".
func (*Backend) Name() string { return "cpu" }

// Gemm is the GEMM the backend's Matmul uses for float32 products.
func (b *Backend) Gemm() Gemm { return b.gemm }

// operand is o as this package's Operand: its host bytes, or the value of a Scalar as
// F32.
func operand(o kernels.Operand) Operand { return operandIn(o, dtype.F32) }

// operandIn is operand, a Scalar read as dt (F32 or F64): the type of the op it is a
// constant of, since a number takes no part in choosing the type an op computes in.
func operandIn(o kernels.Operand, dt dtype.DType) Operand {
	if v, ok := o.ScalarValue(); ok {
		if dt == dtype.F64 {
			return F64([]float64{v}, kernels.Layout{})
		}
		return F32([]float32{float32(v)}, kernels.Layout{})
	}
	return FromBytes(o.DType, o.Mem.Host, o.Layout)
}

// optional is o's operand (a Scalar read as dt's type), or a scalar 0 standing for an
// absent one (an operand a derivative does not read).
func optional(o kernels.Operand, dt dtype.DType) Operand {
	if o.Absent() {
		return F32([]float32{0}, kernels.Layout{})
	}
	return operandIn(o, dt)
}

// rows returns the elements of a contiguous operand of type dt as a slice (nil for an
// absent operand or one without elements).
func rows[T any](op string, o kernels.Operand, dt dtype.DType) []T {
	if o.Absent() {
		return nil
	}
	if o.DType != dt || !o.IsContiguous() {
		panic(fmt.Sprintf("kernels/cpu: %s: a row operand must be contiguous %v, not %v (%v)", op, dt, o.DType, o.Layout))
	}
	n := o.Size()
	if n == 0 {
		return nil
	}
	size := dt.Size()
	end := (o.Offset + n) * size
	if o.Offset < 0 || end > len(o.Mem.Host) {
		panic(fmt.Sprintf("kernels/cpu: %s: operand (%v) reaches past its %d bytes", op, o.Layout, len(o.Mem.Host)))
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&o.Mem.Host[o.Offset*size])), n)
}

// floats is rows of a float operand of T's type (native[T]).
func floats[T float](op string, o kernels.Operand) []T { return rows[T](op, o, native[T]()) }

func i64s(op string, o kernels.Operand) []int64 { return rows[int64](op, o, dtype.I64) }

// scalar reads the one element of o as float64.
func scalar(o kernels.Operand) float64 {
	var v [1]float64
	Copy(F64(v[:], kernels.Layout{}), operandIn(o, dtype.F64))
	return v[0]
}

func (b *Backend) Unary(op kernels.UnaryOp, dst, x kernels.Operand) {
	if d, ok := denseF32(&dst, &dst); ok {
		if v, ok := denseF32(&x, &dst); ok {
			b.UnaryF32(op, d, v)
			return
		}
	}
	Unary(op, operand(dst), operandIn(x, dst.DType))
}

func (*Backend) UnaryF32(op kernels.UnaryOp, dst, x []float32) {
	checkDenseF32(op, len(dst), len(x), len(x))
	checkUnary(op)
	if workers(len(dst), grain) <= 1 { // forRange's one piece, without its generic state
		unaryRun(op, dst, x)
		return
	}
	forRange(len(dst), grain, eltDense[float32, unaryKernel[float32]]{dst: dst, ins: eltIns[float32]{x}, nin: 1, k: unaryKernel[float32]{op}})
}

func (*Backend) UnaryBackward(op kernels.UnaryOp, dx, g, saved kernels.Operand) {
	UnaryBackward(op, operand(dx), operand(g), optional(saved, dx.DType))
}

func (be *Backend) Binary(op kernels.BinaryOp, dst, a, b kernels.Operand) {
	if d, ok := denseF32(&dst, &dst); ok {
		x, okA := denseF32(&a, &dst)
		y, okB := denseF32(&b, &dst)
		if okA && okB {
			be.BinaryF32(op, d, x, y)
			return
		}
	}
	Binary(op, operand(dst), operandIn(a, dst.DType), operandIn(b, dst.DType))
}

func (*Backend) BinaryF32(op kernels.BinaryOp, dst, a, b []float32) {
	checkDenseF32(op, len(dst), len(a), len(b))
	checkBinary(op, kernels.ArgA)
	if workers(len(dst), grain) <= 1 { // forRange's one piece, without its generic state
		binaryRun(op, dst, a, b)
		return
	}
	forRange(len(dst), grain, eltDense[float32, binaryKernel[float32]]{dst: dst, ins: eltIns[float32]{a, b}, nin: 2, k: binaryKernel[float32]{op}})
}

// checkDenseF32 panics unless UnaryF32's or BinaryF32's slices have one length.
func checkDenseF32(op fmt.Stringer, dst, a, b int) {
	if a != dst || b != dst {
		panic(fmt.Sprintf("kernels/cpu: %v over dense float32 slices of %d (dst), %d and %d elements: they must have one length", op, dst, a, b))
	}
}

// denseF32 is o's elements as a float32 slice where o holds float32, is contiguous,
// has like's shape and lies inside its host bytes: the operands of Unary's and
// Binary's common case, which run their dense kernel on these slices directly,
// without this package's Operand, its checks and the iterator's setup (a 1k-element
// Add on the development machine: Backend.Binary took 2.5k instructions, now 1.3k,
// of which the vector loop is 0.5k; BenchmarkSmallOp under callgrind). One pass over
// the dimensions does what Layout.Check and IsContiguous would (sizes and strides not
// negative, the rank, the elements inside the buffer), at a third of their cost.
// Anything else, a malformed operand included, takes the general path and its checks.
func denseF32(o, like *kernels.Operand) ([]float32, bool) {
	if o.DType != dtype.F32 || len(o.Strides) != len(o.Shape) || len(o.Shape) > kernels.MaxRank || o.Offset < 0 {
		return nil, false
	}
	if _, scalar := o.ScalarValue(); scalar || (o != like && !slices.Equal(o.Shape, like.Shape)) {
		return nil, false
	}
	n := 1
	for i := len(o.Shape) - 1; i >= 0; i-- {
		d, s := o.Shape[i], o.Strides[i]
		if d < 0 || s < 0 || (d != 1 && s != n) {
			return nil, false
		}
		n *= d
	}
	h := o.Mem.Host
	if o.Offset+n > len(h)/4 || uintptr(unsafe.Pointer(unsafe.SliceData(h)))%4 != 0 {
		return nil, false
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(h))), len(h)/4)[o.Offset : o.Offset+n], true
}

func (*Backend) BinaryBackward(op kernels.BinaryOp, wrt kernels.Arg, dst, g, a, b kernels.Operand) {
	BinaryBackward(op, wrt, operand(dst), operand(g), optional(a, dst.DType), optional(b, dst.DType))
}

func (*Backend) Copy(dst, src kernels.Operand) { Copy(operand(dst), operandIn(src, dst.DType)) }

func (*Backend) Fill(dst kernels.Operand, v float64) { Fill(operand(dst), v) }

func (*Backend) Axpy(dst kernels.Operand, alpha float64, x kernels.Operand) {
	Axpy(operand(dst), alpha, operandIn(x, dst.DType))
}

func (*Backend) DropoutMask(mask kernels.Operand, p float64, seed uint64) {
	DropoutMask(rows[uint8]("dropout", mask, dtype.Bool), p, seed)
}

func (*Backend) Dropout(dst, x, mask kernels.Operand, p float64) {
	Dropout(operand(dst), operandIn(x, dst.DType), operand(mask), p)
}

func (*Backend) Sum(dst, src kernels.Operand) { Sum(operand(dst), operand(src)) }

func (*Backend) Compare(op kernels.CompareOp, dst, a, b kernels.Operand) {
	in := kernels.CompareType(a, b)
	Compare(op, in, operand(dst), exactOperand(a, in), exactOperand(b, in))
}

func (*Backend) Where(dst, cond, a, b kernels.Operand) {
	if dst.DType.IsFloat() {
		Where(operand(dst), operand(cond), operandIn(a, dst.DType), operandIn(b, dst.DType))
		return
	}
	for _, o := range []kernels.Operand{a, b} {
		if v, ok := o.ScalarValue(); ok && !kernels.IsInteger(v) {
			panic(fmt.Sprintf("kernels/cpu: where: the Scalar %v into a %v output; an integer output takes integers", v, dst.DType))
		}
	}
	Where(operand(dst), operand(cond), exactOperand(a, dtype.I64), exactOperand(b, dtype.I64))
}

// exactOperand is operand, a Scalar as an I64 operand of its value when in is I64 (the
// value is an integer: kernels.CompareType) and as an F64 one of its exact value
// otherwise, which the kernel rounds to in.
func exactOperand(o kernels.Operand, in dtype.DType) Operand {
	v, ok := o.ScalarValue()
	switch {
	case !ok:
		return operand(o)
	case in == dtype.I64:
		return I64([]int64{int64(v)}, kernels.Layout{})
	}
	return F64([]float64{v}, kernels.Layout{})
}
func (*Backend) Mean(dst, src kernels.Operand) { Mean(operand(dst), operand(src)) }
func (*Backend) SumSquares(dst, src kernels.Operand) {
	SumSquares(operand(dst), operand(src))
}

func (*Backend) Max(dst, idx, src kernels.Operand) {
	d := F32(make([]float32, idx.Size()), idx.Layout)
	if !dst.Absent() {
		d = operand(dst)
	}
	Max(d, i64s("max", idx), operand(src))
}

func (*Backend) MaxBackward(dx, g, idx kernels.Operand) {
	MaxBackward(operand(dx), operand(g), i64s("max backward", idx))
}

func (b *Backend) Matmul(dst, x, y kernels.Operand) {
	if dst.Size() == 0 {
		return
	}
	d := operand(dst)
	if x.Shape[len(x.Shape)-1] == 0 {
		Fill(d, 0)
		return
	}
	Matmul(b.gemm, d, operand(x), operand(y), 1, 0)
}

// MatmulBias implements kernels.BiasMatmul on the built-in GEMM: the bias is added to
// each block of the product once its last slice of k is in, while the block is in the
// caches (gemmEpilogue), where Binary would read and write the whole product again. A
// float32 output has the bits of Matmul then Binary's Add; a 16-bit one is rounded
// once, after the bias. It declines float64 and a system BLAS (SUBLET_BLAS), whose
// products the epilogue does not see.
func (b *Backend) MatmulBias(dst, x, y, bias kernels.Operand) bool {
	return b.matmulEpilogue(dst, x, y, bias, false)
}

// MatmulActivation implements kernels.ActivationMatmul for ReLU as MatmulBias does,
// the ReLU Unary's (a NaN stays a NaN) after the bias.
func (b *Backend) MatmulActivation(op kernels.UnaryOp, dst, x, y, bias kernels.Operand) bool {
	return op == kernels.Relu && b.matmulEpilogue(dst, x, y, bias, true)
}

// biasBufs holds the float32 copies of 16-bit biases for matmulEpilogue.
var biasBufs = sync.Pool{New: func() any { return new([]float32) }}

// matmulEpilogue runs a 2-D product with a bias (optional) and a ReLU (with relu) in
// the GEMM's epilogue and reports true, or reports false, writing nothing, where the
// epilogue cannot run.
func (b *Backend) matmulEpilogue(dst, x, y, bias kernels.Operand, relu bool) bool {
	if _, builtin := b.gemm.(*gemmKernel); b.gemm != nil && !builtin {
		return false
	}
	for _, o := range []kernels.Operand{dst, x, y, bias} {
		if o.DType == dtype.F64 || !o.Absent() && !o.DType.IsFloat() {
			return false
		}
	}
	if len(dst.Shape) != 2 || len(x.Shape) != 2 || len(y.Shape) != 2 || dst.Size() == 0 || x.Shape[1] == 0 {
		return false
	}
	n := dst.Shape[1]
	ep := gemmEpilogue{relu: relu}
	if !bias.Absent() {
		if len(bias.Shape) != 1 || bias.Shape[0] != n {
			return false
		}
		bo := operand(bias)
		if bias.DType == dtype.F32 && (bias.Strides[0] == 1 || n == 1) {
			ep.bias = bo.f32s()[bias.Offset : bias.Offset+n]
		} else {
			buf := biasBufs.Get().(*[]float32)
			defer biasBufs.Put(buf)
			*buf = slices.Grow((*buf)[:0], n)[:n]
			readBlock(*buf, matView{o: bo, off: bias.Offset, cs: bias.Strides[0]}, 0, 0, 1, n, 1)
			ep.bias = *buf
		}
	}
	matmul(b.gemm, operand(dst), operand(x), operand(y), 1, 0, ep)
	return true
}

// The row kernels compute in the type of their first input, F32 or F64 (floats checks
// every operand has it); row operands stored as F16 or BF16 (halves checks they share
// it) compute in float32 (rows16.go), with float32 statistics.

// halves is rows of a 16-bit operand of h's type.
func halves(op string, o kernels.Operand, h half) []uint16 {
	return rows[uint16](op, o, dtype.DType(h))
}

func (*Backend) Softmax(dst, x kernels.Operand, outer, n, inner int) {
	softmaxOperands("softmax", dst, x, outer, n, inner)
}

func (*Backend) LogSoftmax(dst, x kernels.Operand, outer, n, inner int) {
	softmaxOperands("log_softmax", dst, x, outer, n, inner)
}

func softmaxOperands(op string, dst, x kernels.Operand, outer, n, inner int) {
	if x.DType.Is16() {
		h := half(x.DType)
		softmax16(op, h, halves(op, dst, h), halves(op, x, h), outer, n, inner, op == "log_softmax")
		return
	}
	byType(softmaxRows[float32], softmaxRows[float64], x.DType)(op, dst, x, outer, n, inner)
}

func softmaxRows[T float](op string, dst, x kernels.Operand, outer, n, inner int) {
	softmax(op, floats[T](op, dst), floats[T](op, x), outer, n, inner, op == "log_softmax")
}

func (*Backend) SoftmaxBackward(dx, g, y kernels.Operand, outer, n, inner int) {
	softmaxBackwardOperands("softmax backward", dx, g, y, outer, n, inner)
}

func (*Backend) LogSoftmaxBackward(dx, g, y kernels.Operand, outer, n, inner int) {
	softmaxBackwardOperands("log_softmax backward", dx, g, y, outer, n, inner)
}

func softmaxBackwardOperands(op string, dx, g, y kernels.Operand, outer, n, inner int) {
	if y.DType.Is16() {
		h := half(y.DType)
		softmaxBackward16(op, h, halves(op, dx, h), halves(op, g, h), halves(op, y, h), outer, n, inner, op == "log_softmax backward")
		return
	}
	byType(softmaxRowsBackward[float32], softmaxRowsBackward[float64], y.DType)(op, dx, g, y, outer, n, inner)
}

func softmaxRowsBackward[T float](op string, dx, g, y kernels.Operand, outer, n, inner int) {
	softmaxBackward(op, floats[T](op, dx), floats[T](op, g), floats[T](op, y), outer, n, inner, op == "log_softmax backward")
}

func (*Backend) LayerNorm(y, mean, rstd, x, w, b kernels.Operand, rows, n int, eps float64) {
	if x.DType.Is16() {
		const op = "layer_norm"
		h := half(x.DType)
		layerNorm16(h, halves(op, y, h), halves(op, x, h), halves(op, w, h), halves(op, b, h),
			floats[float32](op, mean), floats[float32](op, rstd), rows, n, eps)
		return
	}
	byType(layerNorm[float32], layerNorm[float64], x.DType)(y, mean, rstd, x, w, b, rows, n, eps)
}

func layerNorm[T float](y, mean, rstd, x, w, b kernels.Operand, rows, n int, eps float64) {
	const op = "layer_norm"
	LayerNorm(floats[T](op, y), floats[T](op, mean), floats[T](op, rstd), floats[T](op, x), floats[T](op, w),
		floats[T](op, b), rows, n, eps)
}

func (*Backend) LayerNormBackward(dx, dw, db, g, x, mean, rstd, w kernels.Operand, rows, n int) {
	if x.DType.Is16() {
		const op = "layer_norm backward"
		h := half(x.DType)
		layerNormBackward16(h, halves(op, dx, h), halves(op, g, h), halves(op, x, h), halves(op, w, h),
			floats[float32](op, dw), floats[float32](op, db), floats[float32](op, mean), floats[float32](op, rstd), rows, n)
		return
	}
	byType(layerNormBackward[float32], layerNormBackward[float64], x.DType)(dx, dw, db, g, x, mean, rstd, w, rows, n)
}

func layerNormBackward[T float](dx, dw, db, g, x, mean, rstd, w kernels.Operand, rows, n int) {
	const op = "layer_norm backward"
	LayerNormBackward(floats[T](op, dx), floats[T](op, dw), floats[T](op, db), floats[T](op, g), floats[T](op, x),
		floats[T](op, mean), floats[T](op, rstd), floats[T](op, w), rows, n)
}

func (*Backend) CrossEntropy(loss, lse, logits, labels kernels.Operand, n, c int, ignore int64) error {
	if logits.DType.Is16() {
		const op = "cross_entropy"
		h := half(logits.DType)
		v, err := crossEntropy16(h, floats[float32](op, lse), halves(op, logits, h), i64s(op, labels), n, c, ignore)
		if err != nil {
			return err
		}
		Fill(operand(loss), float64(v))
		return nil
	}
	return byType(crossEntropy[float32], crossEntropy[float64], logits.DType)(loss, lse, logits, labels, n, c, ignore)
}

func crossEntropy[T float](loss, lse, logits, labels kernels.Operand, n, c int, ignore int64) error {
	const op = "cross_entropy"
	v, err := CrossEntropy(floats[T](op, lse), floats[T](op, logits), i64s(op, labels), n, c, ignore)
	if err != nil {
		return err
	}
	Fill(operand(loss), float64(v))
	return nil
}

func (*Backend) CrossEntropyBackward(dlogits, logits, lse, labels, g kernels.Operand, n, c int, ignore int64) {
	if logits.DType.Is16() {
		const op = "cross_entropy backward"
		h := half(logits.DType)
		crossEntropyBackward16(h, halves(op, dlogits, h), halves(op, logits, h), floats[float32](op, lse), i64s(op, labels),
			n, c, ignore, scalar(g))
		return
	}
	byType(crossEntropyBackward[float32], crossEntropyBackward[float64], logits.DType)(dlogits, logits, lse, labels, g, n, c, ignore)
}

func crossEntropyBackward[T float](dlogits, logits, lse, labels, g kernels.Operand, n, c int, ignore int64) {
	const op = "cross_entropy backward"
	CrossEntropyBackward(floats[T](op, dlogits), floats[T](op, logits), floats[T](op, lse), i64s(op, labels), n, c, ignore, scalar(g))
}

func (*Backend) MSE(loss, a, b kernels.Operand) {
	byType(mse[float32], mse[float64], a.DType)(loss, a, b)
}

func mse[T float](loss, a, b kernels.Operand) {
	Fill(operand(loss), float64(MSE(floats[T]("mse", a), floats[T]("mse", b))))
}

func (*Backend) MSEBackward(da, db, a, b, g kernels.Operand) {
	byType(mseBackward[float32], mseBackward[float64], a.DType)(da, db, a, b, g)
}

func mseBackward[T float](da, db, a, b, g kernels.Operand) {
	const op = "mse backward"
	MSEBackward(floats[T](op, da), floats[T](op, db), floats[T](op, a), floats[T](op, b), scalar(g))
}

func (*Backend) Embedding(dst, w, idx kernels.Operand, dim int) error {
	return byType(embedding[float32], embedding[float64], w.DType)(dst, w, idx, dim)
}

func embedding[T float](dst, w, idx kernels.Operand, dim int) error {
	const op = "embedding"
	return Embedding(floats[T](op, dst), floats[T](op, w), dim, i64s(op, idx))
}

func (*Backend) EmbeddingBackward(dw, g, idx kernels.Operand, dim int) error {
	return byType(embeddingBackward[float32], embeddingBackward[float64], dw.DType)(dw, g, idx, dim)
}

func embeddingBackward[T float](dw, g, idx kernels.Operand, dim int) error {
	const op = "embedding backward"
	return EmbeddingBackward(floats[T](op, dw), floats[T](op, g), dim, i64s(op, idx))
}

func (*Backend) SGD(c kernels.SGD, p, g, buf kernels.Operand, first bool) {
	byType(sgd[float32], sgd[float64], p.DType)(c, p, g, buf, first)
}

func sgd[T float](c kernels.SGD, p, g, buf kernels.Operand, first bool) {
	const op = "sgd"
	SGDStep(c, floats[T](op, p), floats[T](op, g), floats[T](op, buf), first)
}

func (*Backend) Adam(c kernels.Adam, step int, p, g, m, v kernels.Operand) {
	byType(adam[float32], adam[float64], p.DType)(c, step, p, g, m, v)
}

func adam[T float](c kernels.Adam, step int, p, g, m, v kernels.Operand) {
	const op = "adam"
	AdamStep(c, step, floats[T](op, p), floats[T](op, g), floats[T](op, m), floats[T](op, v))
}

func (*Backend) Unscale(g kernels.Operand, inv float64, found kernels.Operand) {
	if Unscale(operand(g), inv) {
		Fill(operand(found), 1)
	}
}

func (*Backend) NonFinite(x kernels.Operand) bool { return NonFinite(operand(x)) }
