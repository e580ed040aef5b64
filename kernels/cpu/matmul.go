package cpu

import (
	"fmt"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/subletml/sublet/kernels"

	"github.com/subletml/sublet/dtype"
)

// Matmul computes dst = alpha·a·b + beta·dst over the last two dimensions of each
// operand: a is [..., m, k], b is [..., k, n] and dst is [..., m, n]. The dimensions
// before those are batch dimensions; a's and b's broadcast to dst's by numpy rules, so
// a weight [k, n] multiplies every matrix of a batch [B, m, k]. Operands may be
// float64, float32, float16 or bfloat16 with any strides (a transpose is a view with
// swapped strides); products accumulate in float64 when an operand is F64 (gonum's
// Dgemm, see product64) and in float32 otherwise, and dst is rounded once to its type;
// alpha and beta are rounded to that type. When beta is 0, dst is not read. dst must
// not overlap a or b.
//
// The gradient of a weight shared across a batch sums over the batch; with a
// contiguous a [B, m, k] and output gradient g [B, m, n] it is one product,
// dW = aᵀ·g over the views [B·m, k] and [B·m, n], not B products and a Sum.
//
// gemm runs the products whose operands are all float32 with a unit stride in each
// matrix (nil means Builtin()); every other product runs on the built-in GEMM, which
// converts float16 and bfloat16 while packing and writes such outputs through float32
// blocks of bounded size.
func Matmul(gemm Gemm, dst, a, b Operand, alpha, beta float64) {
	matmul(gemm, dst, a, b, alpha, beta, gemmEpilogue{})
}

// matmul is Matmul with ep run on each block of the built-in GEMM's output. Products
// that run elsewhere (a float64 operand: product64; a system BLAS) never see ep: a
// caller with an epilogue leaves those out (Backend.matmulEpilogue declines them).
func matmul(gemm Gemm, dst, a, b Operand, alpha, beta float64, ep gemmEpilogue) {
	const op = "matmul"
	ra, rb, rd := len(a.Shape), len(b.Shape), len(dst.Shape)
	if ra < 2 || rb < 2 || rd < 2 {
		panic(fmt.Sprintf("kernels/cpu: %s: operands need 2 or more dimensions: a %v, b %v, dst %v", op, a.Shape, b.Shape, dst.Shape))
	}
	m, k, n := a.Shape[ra-2], a.Shape[ra-1], b.Shape[rb-1]
	if b.Shape[rb-2] != k || dst.Shape[rd-2] != m || dst.Shape[rd-1] != n {
		panic(fmt.Sprintf("kernels/cpu: %s: shapes a %v, b %v do not multiply into dst %v", op, a.Shape, b.Shape, dst.Shape))
	}
	dst.requireFloat(op)
	for _, o := range []*Operand{&a, &b} {
		if !o.dt.IsFloat() {
			panic(fmt.Sprintf("kernels/cpu: %s: operands must be float64, float32, float16 or bfloat16, not %v", op, o.dt))
		}
	}
	mm := matmulProducts{m: m, n: n, k: k, alpha: alpha, beta: beta, wide: wide(dst, a, b), g: bestGemmKernel(), ep: ep}
	switch v := gemm.(type) {
	case nil:
	case *gemmKernel:
		mm.g = v
	default:
		mm.sys = v
	}
	if ra == 2 && rb == 2 && rd == 2 {
		// One product, called directly: a closure handed to the workers would capture
		// the operands and move them to the heap at every call, which was a quarter of
		// a small training step's garbage.
		mm.run(matrixOf(a, a.Offset), matrixOf(b, b.Offset), matrixOf(dst, dst.Offset), workers(m*n*k, gemmGrain) > 1)
		return
	}
	matmulBatches(mm, dst, a, b)
}

// matmulProducts is one Matmul call's products: their sizes, scalars and GEMM.
type matmulProducts struct {
	m, n, k     int
	alpha, beta float64
	wide        bool        // an operand is F64: gonum's Dgemm (product64)
	g           *gemmKernel // the built-in GEMM, or the one the caller chose
	sys         Gemm        // a system BLAS the caller chose, else nil
	ep          gemmEpilogue
}

// run computes one product of the call.
func (mm *matmulProducts) run(a, b, dst matView, parallel bool) {
	if mm.wide {
		product64(mm.m, mm.n, mm.k, mm.alpha, a, b, mm.beta, dst)
		return
	}
	alpha, beta := float32(mm.alpha), float32(mm.beta)
	if mm.sys != nil && systemProduct(mm.sys, mm.m, mm.n, mm.k, alpha, a, b, beta, dst) {
		return
	}
	mm.g.product(mm.m, mm.n, mm.k, alpha, a, b, beta, dst, parallel, mm.ep)
}

// matmulBatches runs a call's products over the batch dimensions of its operands.
func matmulBatches(mm matmulProducts, dst, a, b Operand) {
	batchOf := func(o Operand) kernels.Layout {
		r := len(o.Shape) - 2
		return kernels.Layout{Shape: o.Shape[:r], Strides: o.Strides[:r], Offset: o.Offset}
	}
	it := newIter("matmul", batchOf(dst), batchOf(a), batchOf(b))
	batches(mm.m, mm.n, mm.k, it.size, func(i int, parallel bool) {
		offs := it.offsets(i)
		mm.run(matrixOf(a, offs[1]), matrixOf(b, offs[2]), matrixOf(dst, offs[0]), parallel)
	})
}

// matrixOf is the matrix of o's last two dimensions that starts at element off.
func matrixOf(o Operand, off int) matView {
	r := len(o.Shape)
	return matView{o: o, off: off, rs: o.Strides[r-2], cs: o.Strides[r-1]}
}

// offsets returns every operand's element offset for element i of the walk.
func (it *iter) offsets(i int) [maxOperands]int {
	var offs [maxOperands]int
	for k := range it.ops {
		offs[k] = it.off[k]
	}
	for d := it.rank - 1; d >= 0; d-- {
		x := i % it.shape[d]
		i /= it.shape[d]
		for k := range it.ops {
			offs[k] += x * it.st[k][d]
		}
	}
	return offs
}

// blasLayout says how a matrix of rows×cols elements of dt reaches a BLAS: stored
// row-major (trans false) or transposed, with its leading dimension; ok is false when
// it holds another type, neither stride is 1 or the other is too small for a BLAS to
// accept.
func blasLayout(v matView, rows, cols int, dt dtype.DType) (trans bool, ld int, ok bool) {
	switch {
	case v.o.dt != dt:
		return false, 0, false
	case rows == 1 && v.cs == 1:
		return false, max(cols, 1), true // one row: its stride is never used
	case v.cs == 1 || cols == 1:
		return false, v.rs, v.rs >= max(cols, 1)
	case rows == 1:
		return true, max(v.cs, 1), v.cs >= 1
	case v.rs == 1:
		return true, v.cs, v.cs >= rows
	}
	return false, 0, false
}

// systemProduct runs one product on a system Gemm when every operand suits it.
func systemProduct(sys Gemm, m, n, k int, alpha float32, a, b matView, beta float32, c matView) bool {
	ta, lda, okA := blasLayout(a, m, k, dtype.F32)
	tb, ldb, okB := blasLayout(b, k, n, dtype.F32)
	tc, ldc, okC := blasLayout(c, m, n, dtype.F32)
	if !okA || !okB || !okC || tc {
		return false
	}
	sys.Sgemm(ta, tb, m, n, k, alpha, a.o.f32s()[a.off:], lda, b.o.f32s()[b.off:], ldb, beta, c.o.f32s()[c.off:], ldc)
	return true
}

// Output blocks of the built-in product when dst is not row-major float32.
const (
	outRows = 256
	outCols = 512
)

var outBlocks = sync.Pool{New: func() any { s := make([]float32, outRows*outCols); return &s }}

// product runs one built-in product into dst: directly when dst is row-major
// float32, else through float32 blocks of outRows×outCols that are loaded (scaled by
// beta), accumulated and stored back in dst's type; ep runs on each block before it is
// stored, so a 16-bit dst is rounded once.
func (g *gemmKernel) product(m, n, k int, alpha float32, a, b matView, beta float32, dst matView, parallel bool, ep gemmEpilogue) {
	if dst.o.dt == dtype.F32 && (dst.cs == 1 || n == 1) {
		g.run(m, n, k, alpha, a, b, beta, dst.o.f32s()[dst.off:], dst.rs, parallel, ep)
		return
	}
	bp := outBlocks.Get().(*[]float32)
	defer outBlocks.Put(bp)
	block := *bp
	for i0 := 0; i0 < m; i0 += outRows {
		rows := min(outRows, m-i0)
		for j0 := 0; j0 < n; j0 += outCols {
			cols := min(outCols, n-j0)
			readBlock(block, dst, i0, j0, rows, cols, beta)
			ab, bb := a, b
			ab.off += i0 * a.rs
			bb.off += j0 * b.cs
			g.run(rows, cols, k, alpha, ab, bb, 1, block, cols, parallel, ep.from(j0))
			writeBlock(dst, i0, j0, rows, cols, block)
		}
	}
}

// readBlock reads the rows×cols block of v at (i0, j0), times scale, into the
// row-major dst (zeros when scale is 0: v is then not read, and may hold NaNs).
func readBlock[T float](dst []T, v matView, i0, j0, rows, cols int, scale T) {
	var buf [chunk]T
	for i := range rows {
		row := dst[i*cols : (i+1)*cols]
		if scale == 0 {
			clear(row)
			continue
		}
		for q := 0; q < cols; q += chunk {
			x := load(&v.o, v.off+(i0+i)*v.rs+(j0+q)*v.cs, v.cs, min(chunk, cols-q), &buf)
			for j, e := range x {
				row[q+j] = scale * e
			}
		}
	}
}

// writeBlock stores the row-major rows×cols block src into v at (i0, j0), in v's type.
func writeBlock[T float](v matView, i0, j0, rows, cols int, src []T) {
	for i := range rows {
		storeFloats(v.o, v.off+(i0+i)*v.rs+j0*v.cs, v.cs, src[i*cols:(i+1)*cols])
	}
}

// block64 is the side of the blocks product64 converts operands into.
const block64 = 256

var blocks64 = sync.Pool{New: func() any { s := make([]float64, 3*block64*block64); return &s }}

// product64 runs one product in float64 through gonum's Dgemm (pure Go and assembly,
// parallel over blocks of C, each summing along k in a fixed order, so the bits do not
// depend on GOMAXPROCS). Operands that are F64 with a unit stride go to it as they
// are; otherwise blocks of block64 (rows, columns, and k) are converted into float64
// scratch, C's block accumulated there and rounded once into dst's type.
func product64(m, n, k int, alpha float64, a, b matView, beta float64, c matView) {
	if m == 0 || n == 0 {
		return
	}
	var impl gonum.Implementation
	ta, lda, okA := blasLayout(a, m, k, dtype.F64)
	tb, ldb, okB := blasLayout(b, k, n, dtype.F64)
	tc, ldc, okC := blasLayout(c, m, n, dtype.F64)
	if okA && okB && okC && !tc {
		impl.Dgemm(transpose(ta), transpose(tb), m, n, k, alpha, a.o.f64s()[a.off:], lda, b.o.f64s()[b.off:], ldb,
			beta, c.o.f64s()[c.off:], ldc)
		return
	}
	bp := blocks64.Get().(*[]float64)
	defer blocks64.Put(bp)
	const sq = block64 * block64
	ab, bb, cb := (*bp)[:sq], (*bp)[sq:2*sq], (*bp)[2*sq:]
	for i0 := 0; i0 < m; i0 += block64 {
		rows := min(block64, m-i0)
		for j0 := 0; j0 < n; j0 += block64 {
			cols := min(block64, n-j0)
			readBlock(cb, c, i0, j0, rows, cols, beta)
			for p0 := 0; p0 < k; p0 += block64 {
				depth := min(block64, k-p0)
				readBlock(ab, a, i0, p0, rows, depth, 1)
				readBlock(bb, b, p0, j0, depth, cols, 1)
				impl.Dgemm(blas.NoTrans, blas.NoTrans, rows, cols, depth, alpha, ab, depth, bb, cols, 1, cb, cols)
			}
			writeBlock(c, i0, j0, rows, cols, cb)
		}
	}
}

func transpose(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}
