package cpu

import (
	"fmt"
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

var _ kernels.Backend = (*Backend)(nil)

// Name is "cpu".
func (*Backend) Name() string { return "cpu" }

// Gemm is the GEMM the backend's Matmul uses for float32 products.
func (b *Backend) Gemm() Gemm { return b.gemm }

// operand is o as this package's Operand: its host bytes, or the value of a Scalar.
func operand(o kernels.Operand) Operand {
	if v, ok := o.ScalarValue(); ok {
		return F32([]float32{float32(v)}, kernels.Layout{})
	}
	return FromBytes(o.DType, o.Mem.Host, o.Layout)
}

// optional is o's operand, or a scalar 0 standing for an absent one (an operand a
// derivative does not read).
func optional(o kernels.Operand) Operand {
	if o.Absent() {
		return F32([]float32{0}, kernels.Layout{})
	}
	return operand(o)
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

func f32s(op string, o kernels.Operand) []float32 { return rows[float32](op, o, dtype.F32) }
func i64s(op string, o kernels.Operand) []int64   { return rows[int64](op, o, dtype.I64) }

// scalar reads the one element of o as float32.
func scalar(o kernels.Operand) float32 {
	var v [1]float32
	Copy(F32(v[:], kernels.Layout{}), operand(o))
	return v[0]
}

func (*Backend) Unary(op kernels.UnaryOp, dst, x kernels.Operand) {
	Unary(op, operand(dst), operand(x))
}

func (*Backend) UnaryBackward(op kernels.UnaryOp, dx, g, saved kernels.Operand) {
	UnaryBackward(op, operand(dx), operand(g), optional(saved))
}

func (*Backend) Binary(op kernels.BinaryOp, dst, a, b kernels.Operand) {
	Binary(op, operand(dst), operand(a), operand(b))
}

func (*Backend) BinaryBackward(op kernels.BinaryOp, wrt kernels.Arg, dst, g, a, b kernels.Operand) {
	BinaryBackward(op, wrt, operand(dst), operand(g), optional(a), optional(b))
}

func (*Backend) Copy(dst, src kernels.Operand) { Copy(operand(dst), operand(src)) }

func (*Backend) Fill(dst kernels.Operand, v float64) { Fill(operand(dst), v) }

func (*Backend) Axpy(dst kernels.Operand, alpha float32, x kernels.Operand) {
	Axpy(operand(dst), alpha, operand(x))
}

func (*Backend) DropoutMask(mask kernels.Operand, p float32, seed uint64) {
	DropoutMask(rows[uint8]("dropout", mask, dtype.Bool), p, seed)
}

func (*Backend) Dropout(dst, x, mask kernels.Operand, p float32) {
	Dropout(operand(dst), operand(x), operand(mask), p)
}

func (*Backend) Sum(dst, src kernels.Operand)  { Sum(operand(dst), operand(src)) }
func (*Backend) Mean(dst, src kernels.Operand) { Mean(operand(dst), operand(src)) }

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

func (*Backend) Softmax(dst, x kernels.Operand, outer, n, inner int) {
	Softmax(f32s("softmax", dst), f32s("softmax", x), outer, n, inner)
}

func (*Backend) LogSoftmax(dst, x kernels.Operand, outer, n, inner int) {
	LogSoftmax(f32s("log_softmax", dst), f32s("log_softmax", x), outer, n, inner)
}

func (*Backend) SoftmaxBackward(dx, g, y kernels.Operand, outer, n, inner int) {
	const op = "softmax backward"
	SoftmaxBackward(f32s(op, dx), f32s(op, g), f32s(op, y), outer, n, inner)
}

func (*Backend) LogSoftmaxBackward(dx, g, y kernels.Operand, outer, n, inner int) {
	const op = "log_softmax backward"
	LogSoftmaxBackward(f32s(op, dx), f32s(op, g), f32s(op, y), outer, n, inner)
}

func (*Backend) LayerNorm(y, mean, rstd, x, w, b kernels.Operand, rows, n int, eps float32) {
	const op = "layer_norm"
	LayerNorm(f32s(op, y), f32s(op, mean), f32s(op, rstd), f32s(op, x), f32s(op, w), f32s(op, b), rows, n, eps)
}

func (*Backend) LayerNormBackward(dx, dw, db, g, x, mean, rstd, w kernels.Operand, rows, n int) {
	const op = "layer_norm backward"
	LayerNormBackward(f32s(op, dx), f32s(op, dw), f32s(op, db), f32s(op, g), f32s(op, x), f32s(op, mean),
		f32s(op, rstd), f32s(op, w), rows, n)
}

func (*Backend) CrossEntropy(loss, lse, logits, labels kernels.Operand, n, c int, ignore int64) error {
	const op = "cross_entropy"
	v, err := CrossEntropy(f32s(op, lse), f32s(op, logits), i64s(op, labels), n, c, ignore)
	if err != nil {
		return err
	}
	Fill(operand(loss), float64(v))
	return nil
}

func (*Backend) CrossEntropyBackward(dlogits, logits, lse, labels, g kernels.Operand, n, c int, ignore int64) {
	const op = "cross_entropy backward"
	CrossEntropyBackward(f32s(op, dlogits), f32s(op, logits), f32s(op, lse), i64s(op, labels), n, c, ignore, scalar(g))
}

func (*Backend) MSE(loss, a, b kernels.Operand) {
	Fill(operand(loss), float64(MSE(f32s("mse", a), f32s("mse", b))))
}

func (*Backend) MSEBackward(da, db, a, b, g kernels.Operand) {
	const op = "mse backward"
	MSEBackward(f32s(op, da), f32s(op, db), f32s(op, a), f32s(op, b), scalar(g))
}

func (*Backend) Embedding(dst, w, idx kernels.Operand, dim int) error {
	const op = "embedding"
	return Embedding(f32s(op, dst), f32s(op, w), dim, i64s(op, idx))
}

func (*Backend) EmbeddingBackward(dw, g, idx kernels.Operand, dim int) error {
	const op = "embedding backward"
	return EmbeddingBackward(f32s(op, dw), f32s(op, g), dim, i64s(op, idx))
}

func (*Backend) SGD(c kernels.SGD, p, g, buf kernels.Operand, first bool) {
	const op = "sgd"
	SGDStep(c, f32s(op, p), f32s(op, g), f32s(op, buf), first)
}

func (*Backend) Adam(c kernels.Adam, step int, p, g, m, v kernels.Operand) {
	const op = "adam"
	AdamStep(c, step, f32s(op, p), f32s(op, g), f32s(op, m), f32s(op, v))
}

func (*Backend) Unscale(g kernels.Operand, inv float32, found kernels.Operand) {
	if Unscale(operand(g), inv) {
		Fill(operand(found), 1)
	}
}

func (*Backend) NonFinite(x kernels.Operand) bool { return NonFinite(operand(x)) }
