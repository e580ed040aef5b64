package cuda

import (
	"fmt"
	"unsafe"

	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// mat mirrors src/common.cuh's Mat: the fallback GEMM's matrix strides.
type mat struct{ rs, cs [3]int64 }

// alphaOne and betaZero are the GEMM's scalars, read by cuBLAS from host memory
// during the call (host pointer mode), of the compute type's precision (the 64 forms
// for CUBLAS_COMPUTE_64F); package variables, so passing them allocates nothing.
var (
	alphaOne, betaZero     float32 = 1, 0
	alphaOne64, betaZero64 float64 = 1, 0
)

// gemmAlgo is CUBLAS_GEMM_DEFAULT (-1) as a variable, which converts to the uintptr
// cuBLAS reads the low 32 bits of.
var gemmAlgo int64 = cublasGemmDefault

// Matmul runs each product on cuBLAS when the operands suit it (two of one float type,
// each matrix with a unit stride in one dimension, a row-major dst of that type or, but
// for F64, F32; transposed views pass as CUBLAS_OP_T, nothing is copied), else on the
// fallback kernel, which reads any types and strides. Products with an F64 operand
// compute in float64, as kernels/cpu's do: three F64 operands on cuBLAS in
// CUBLAS_COMPUTE_64F, any other mix on the fallback in double.
func (b *Backend) Matmul(dst, x, y kernels.Operand) {
	const op = "matmul"
	ra, rb, rd := len(x.Shape), len(y.Shape), len(dst.Shape)
	if ra < 2 || rb < 2 || rd < 2 {
		panic(fmt.Sprintf("kernels/cuda: %s: operands need 2 or more dimensions: a %v, b %v, dst %v", op, x.Shape, y.Shape, dst.Shape))
	}
	m, k, n := x.Shape[ra-2], x.Shape[ra-1], y.Shape[rb-1]
	if y.Shape[rb-2] != k || dst.Shape[rd-2] != m || dst.Shape[rd-1] != n {
		panic(fmt.Sprintf("kernels/cuda: %s: shapes a %v, b %v do not multiply into dst %v", op, x.Shape, y.Shape, dst.Shape))
	}
	requireFloat(op, dst)
	for _, o := range []kernels.Operand{x, y} {
		checkOperand(op, o)
		if !o.DType.IsFloat() {
			panic(fmt.Sprintf("kernels/cuda: %s: operands must be float64, float32, float16 or bfloat16, not %v", op, o.DType))
		}
	}
	if dst.Size() == 0 {
		return
	}
	if k == 0 {
		b.Fill(dst, 0)
		return
	}
	var w walk
	newWalk(op, &w, batchOf(dst), batchOf(x), batchOf(y))
	f64 := in64(dst, x, y)
	if l, err := b.blasLib(); err == nil && b.cublas(l, &w, f64, dst, x, y, m, n, k) {
		return
	}
	b.gemmFallback(&w, f64, dst, x, y, m, n, k)
}

// batchOf is o without its last two dimensions: the walk over its matrices.
func batchOf(o kernels.Operand) kernels.Operand {
	r := len(o.Shape) - 2
	o.Layout = kernels.Layout{Shape: o.Shape[:r], Strides: o.Strides[:r], Offset: o.Offset}
	return o
}

// blasLayout says how a matrix of rows×cols with strides rs, cs reaches cuBLAS:
// row-major (trans false) or column-major, with its leading dimension; ok is false
// when neither stride is 1 or the other is too small. A dimension of size 1 takes
// any stride. (kernels/cpu's blasLayout makes the same choice for a system BLAS.)
func blasLayout(rows, cols int, rs, cs int64) (trans bool, ld int64, ok bool) {
	switch {
	case rows == 1 && cs == 1:
		return false, int64(max(cols, 1)), true
	case cs == 1 || cols == 1:
		return false, rs, rs >= int64(max(cols, 1))
	case rows == 1:
		return true, max(cs, 1), cs >= 1
	case rs == 1:
		return true, cs, cs >= int64(rows)
	}
	return false, 0, false
}

// blasType is dt's cudaDataType.
func blasType(dt dtype.DType) uintptr {
	switch dt {
	case dtype.F64:
		return cudaR64F
	case dtype.F16:
		return cudaR16F
	case dtype.BF16:
		return cudaR16BF
	}
	return cudaR32F
}

// cublas runs the products on cuBLAS and reports true, or reports false (nothing
// launched) when the operands do not suit it. Row-major C = A·B is column-major
// Cᵀ = Bᵀ·Aᵀ: cuBLAS gets (B, A) with m and n swapped. f64 (an operand is F64) takes
// three F64 operands, which cuBLAS multiplies in CUBLAS_COMPUTE_64F.
func (b *Backend) cublas(l *blasLib, w *walk, f64 bool, dst, x, y kernels.Operand, m, n, k int) bool {
	at, bt, ct := x.DType, y.DType, dst.DType
	switch {
	case at != bt:
		return false
	case f64:
		if at != dtype.F64 || ct != dtype.F64 {
			return false
		}
	case ct != at && ct != dtype.F32:
		return false
	}
	r := len(x.Shape)
	ta, lda, okA := blasLayout(m, k, int64(x.Strides[r-2]), int64(x.Strides[r-1]))
	r = len(y.Shape)
	tb, ldb, okB := blasLayout(k, n, int64(y.Strides[r-2]), int64(y.Strides[r-1]))
	r = len(dst.Shape)
	tc, ldc, okC := blasLayout(m, n, int64(dst.Strides[r-2]), int64(dst.Strides[r-1]))
	if !okA || !okB || !okC || tc || w.rank > 2 && w.size > 1 {
		return false
	}
	compute, alpha, beta := uintptr(cublasCompute32F), uintptr(unsafe.Pointer(&alphaOne)), uintptr(unsafe.Pointer(&betaZero))
	switch {
	case f64:
		compute, alpha, beta = cublasCompute64F, uintptr(unsafe.Pointer(&alphaOne64)), uintptr(unsafe.Pointer(&betaZero64))
	case at == dtype.F32 && b.tf32.Load():
		compute = cublasCompute32FFastTF32
	}
	opA, opB := uintptr(cublasOpN), uintptr(cublasOpN)
	if ta {
		opA = cublasOpT
	}
	if tb {
		opB = cublasOpT
	}
	s := dst.Mem.Stream
	h, err := b.blas.acquire(l, s)
	if err != nil {
		b.fault(err)
		return false
	}
	defer b.blas.put(h)
	// The batches: one strided-batched call over the innermost batch dimension, once
	// per index of the outer one (rank 2 after merging; more is left to the fallback).
	inner, outer := w.size, int64(1)
	var sa, sb, sc, oa, ob, oc int64
	if w.rank >= 1 && w.size > 1 {
		last := w.rank - 1
		inner = w.shape[last]
		sc, sa, sb = w.stride[0][last], w.stride[1][last], w.stride[2][last]
		if w.rank == 2 {
			outer = w.shape[0]
			oc, oa, ob = w.stride[0][0], w.stride[1][0], w.stride[2][0]
		}
	}
	esA, esB, esC := uint64(at.Size()), uint64(bt.Size()), uint64(ct.Size())
	for o := range outer {
		b.launches.Add(1)
		pa, pb, pc := w.base[1]+uint64(o*oa)*esA, w.base[2]+uint64(o*ob)*esB, w.base[0]+uint64(o*oc)*esC
		err = b.blas.call(l.gemmStridedBatchedEx, "cublasGemmStridedBatchedEx", h.h, opB, opA,
			uintptr(n), uintptr(m), uintptr(k), alpha,
			uintptr(pb), blasType(bt), uintptr(ldb), uintptr(sb),
			uintptr(pa), blasType(at), uintptr(lda), uintptr(sa),
			beta, uintptr(pc), blasType(ct), uintptr(ldc), uintptr(sc),
			uintptr(inner), compute, uintptr(gemmAlgo))
		if err != nil {
			b.fault(fmt.Errorf("%w (m=%d n=%d k=%d, batch %d, %v·%v→%v)", err, m, n, k, inner, at, bt, ct))
			return true
		}
	}
	return true
}

// gemmFallback runs the products on gemm_tiled, in double when f64.
func (b *Backend) gemmFallback(w *walk, f64 bool, dst, x, y kernels.Operand, m, n, k int) {
	var mt mat
	for i, o := range []kernels.Operand{dst, x, y} {
		r := len(o.Shape)
		mt.rs[i], mt.cs[i] = int64(o.Strides[r-2]), int64(o.Strides[r-1])
	}
	tiles := func(v int) uint32 { return uint32(min((v+15)/16, 65535)) }
	cfg := cudadev.LaunchConfig{
		Grid:   cudadev.Dim3{X: tiles(n), Y: tiles(m), Z: uint32(min(w.size, 65535))},
		Block:  cudadev.Dim3{X: block},
		Stream: dst.Mem.Stream,
	}
	b.launch(kGemmTiled.in(f64), cfg, cudadev.ArgBytes(w.bytes()),
		cudadev.ArgBytes(unsafe.Slice((*byte)(unsafe.Pointer(&mt)), unsafe.Sizeof(mt))),
		cudadev.ArgInt64(int64(m)), cudadev.ArgInt64(int64(n)), cudadev.ArgInt64(int64(k)))
}
