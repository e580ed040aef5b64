package cuda

import (
	"fmt"

	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/kernels"
)

// warpRow is the longest row a warp handles alone; longer rows get a whole block.
const warpRow = 1024

// checkAxis panics unless the sizes of an [outer, n, inner] kernel are non-negative.
func checkAxis(op string, outer, n, inner int) {
	if outer < 0 || n < 0 || inner < 0 {
		panic(fmt.Sprintf("kernels/cuda: %s: negative size [%d, %d, %d]", op, outer, n, inner))
	}
}

func (b *Backend) Softmax(dst, x kernels.Operand, outer, n, inner int) {
	b.softmax("softmax", dst, x, outer, n, inner, 0)
}

func (b *Backend) LogSoftmax(dst, x kernels.Operand, outer, n, inner int) {
	b.softmax("log_softmax", dst, x, outer, n, inner, 1)
}

// softmax computes in x's type (F32 or F64), or in float32 for F16 and BF16 rows: every
// operand is of x's type.
func (b *Backend) softmax(op string, dst, x kernels.Operand, outer, n, inner int, log int32) {
	checkAxis(op, outer, n, inner)
	size := outer * n * inner
	ft := rowStorage(x)
	d, s := rowsOf(op, "dst", dst, ft, size), rowsOf(op, "x", x, ft, size)
	if size == 0 {
		return
	}
	st := dst.Mem.Stream
	if inner == 1 {
		k, g := rowKernel(kSoftmaxRegsWarp, kSoftmaxRegs16Warp, kSoftmaxRowsWarp, ft, n, d, s)
		b.launch(k, rowsGrid(int64(outer), g, st), cudadev.ArgUint64(d), cudadev.ArgUint64(s),
			cudadev.ArgInt64(int64(outer)), cudadev.ArgInt64(int64(n)), cudadev.ArgInt32(log))
		return
	}
	b.launch(kSoftmaxCols.stored(ft), b.grid(int64(outer*inner), st), cudadev.ArgUint64(d), cudadev.ArgUint64(s),
		cudadev.ArgInt64(int64(outer)), cudadev.ArgInt64(int64(n)), cudadev.ArgInt64(int64(inner)), cudadev.ArgInt32(log))
}

func (b *Backend) SoftmaxBackward(dx, g, y kernels.Operand, outer, n, inner int) {
	b.softmaxBackward("softmax backward", dx, g, y, outer, n, inner, 0)
}

func (b *Backend) LogSoftmaxBackward(dx, g, y kernels.Operand, outer, n, inner int) {
	b.softmaxBackward("log_softmax backward", dx, g, y, outer, n, inner, 1)
}

// softmaxBackward computes as softmax does, every operand of y's type.
func (b *Backend) softmaxBackward(op string, dx, g, y kernels.Operand, outer, n, inner int, log int32) {
	checkAxis(op, outer, n, inner)
	size := outer * n * inner
	ft := rowStorage(y)
	pdx, pg, py := rowsOf(op, "dx", dx, ft, size), rowsOf(op, "g", g, ft, size), rowsOf(op, "y", y, ft, size)
	if size == 0 {
		return
	}
	st := dx.Mem.Stream
	if inner == 1 {
		k, gs := rowKernel(kSoftmaxBackwardRegsWarp, kSoftmaxBackwardRegs16Warp, kSoftmaxBackwardRowsWarp, ft, n, pdx, pg, py)
		b.launch(k, rowsGrid(int64(outer), gs, st), cudadev.ArgUint64(pdx), cudadev.ArgUint64(pg), cudadev.ArgUint64(py),
			cudadev.ArgInt64(int64(outer)), cudadev.ArgInt64(int64(n)), cudadev.ArgInt32(log))
		return
	}
	b.launch(kSoftmaxBackwardCols.stored(ft), b.grid(int64(outer*inner), st), cudadev.ArgUint64(pdx), cudadev.ArgUint64(pg), cudadev.ArgUint64(py),
		cudadev.ArgInt64(int64(outer)), cudadev.ArgInt64(int64(n)), cudadev.ArgInt64(int64(inner)), cudadev.ArgInt32(log))
}
