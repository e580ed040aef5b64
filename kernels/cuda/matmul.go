package cuda

import (
	"fmt"
	"unsafe"

	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/kernels"
)

// mat mirrors src/common.cuh's Mat: the fallback GEMM's matrix strides.
type mat struct{ rs, cs [3]int64 }

// Matmul runs the products on the tiled kernel, which reads any types and strides.
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
			panic(fmt.Sprintf("kernels/cuda: %s: operands must be float32, float16 or bfloat16, not %v", op, o.DType))
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
	b.gemmFallback(&w, dst, x, y, m, n, k)
}

// batchOf is o without its last two dimensions: the walk over its matrices.
func batchOf(o kernels.Operand) kernels.Operand {
	r := len(o.Shape) - 2
	o.Layout = kernels.Layout{Shape: o.Shape[:r], Strides: o.Strides[:r], Offset: o.Offset}
	return o
}

// gemmFallback runs the products on gemm_tiled.
func (b *Backend) gemmFallback(w *walk, dst, x, y kernels.Operand, m, n, k int) {
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
	b.launch(kGemmTiled, cfg, cudadev.ArgBytes(w.bytes()),
		cudadev.ArgBytes(unsafe.Slice((*byte)(unsafe.Pointer(&mt)), unsafe.Sizeof(mt))),
		cudadev.ArgInt64(int64(m)), cudadev.ArgInt64(int64(n)), cudadev.ArgInt64(int64(k)))
}
