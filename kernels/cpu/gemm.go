package cpu

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// Sgemm computes C = alpha·op(A)·op(B) + beta·C for row-major matrices, as CBLAS's
// cblas_sgemm with CblasRowMajor: op(A) is m×k, op(B) is k×n, C is m×n with ldc floats
// between rows. A is stored m×k (lda ≥ k), or k×m when transA (lda ≥ m); B is stored
// k×n (ldb ≥ n), or n×k when transB (ldb ≥ k). When beta is 0, C is not read, so it
// may hold NaNs. C must not overlap A or B.
//
// The work runs through the fastest micro-kernel the CPU has (AVX-512, AVX2+FMA, or
// pure Go), parallel over blocks of C. Each element of C accumulates its k products in
// the same order whatever GOMAXPROCS is, so results are deterministic.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	bestGemmKernel().Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// SgemmBatched runs batch independent Sgemm calls: matrix i of A starts at
// a[i·strideA], of B at b[i·strideB], of C at c[i·strideC]. A stride of 0 shares one
// matrix across the batch (a weight multiplying a batch of activations); C's matrices
// must not overlap each other.
func SgemmBatched(transA, transB bool, m, n, k int, alpha float32, a []float32, lda, strideA int, b []float32, ldb, strideB int, beta float32, c []float32, ldc, strideC int, batch int) {
	bestGemmKernel().SgemmBatched(transA, transB, m, n, k, alpha, a, lda, strideA, b, ldb, strideB, beta, c, ldc, strideC, batch)
}

// Gemm is a single-precision matrix multiply following Sgemm's contract: the built-in
// one (Builtin) or a system BLAS that package kernels/cpu/blas loads at run time.
type Gemm interface {
	// Name says which implementation runs: "builtin-avx512", "openblas", …
	Name() string
	Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)
	SgemmBatched(transA, transB bool, m, n, k int, alpha float32, a []float32, lda, strideA int, b []float32, ldb, strideB int, beta float32, c []float32, ldc, strideC int, batch int)
}

// Builtin returns the built-in GEMM, the one Sgemm and SgemmBatched run: the fastest
// micro-kernel this CPU has ("builtin-avx512", "builtin-avx2" or "builtin-go").
func Builtin() Gemm { return bestGemmKernel() }

var bestGemmKernel = sync.OnceValue(func() *gemmKernel { return gemmKernels()[0] })

// gemmKernel is a micro-kernel with the blocking that suits it: C is computed in
// mc×nc blocks over kc-long slices of k; A is packed into mr-row panels, B into nr-
// column panels, both zero-padded to whole panels.
type gemmKernel struct {
	name         string
	mr, nr       int
	kc, mc, nc   int
	micro        func(k int, a, b, c *float32, ldc int, alpha float32)
	packA, packB sync.Pool // *[]float32 of mc·kc and kc·nc floats (rounded to panels)
	tiles        sync.Pool // *[]float32 of mr·nr floats for partial tiles
}

func newGemmKernel(name string, mr, nr, kc, mc, nc int, micro func(k int, a, b, c *float32, ldc int, alpha float32)) *gemmKernel {
	g := &gemmKernel{name: name, mr: mr, nr: nr, kc: kc, mc: mc, nc: nc, micro: micro}
	g.packA.New = func() any { s := make([]float32, mc*kc); return &s }
	g.packB.New = func() any { s := make([]float32, kc*nc); return &s }
	g.tiles.New = func() any { s := make([]float32, mr*nr); return &s }
	return g
}

// gemmSerial is the work (m·n·k) below which Sgemm stays on the calling goroutine.
const gemmSerial = 64 * 64 * 64

func checkMatrix(name string, what string, rows, cols, ld, have int) {
	if rows == 0 || cols == 0 {
		return
	}
	if ld < cols {
		panic(fmt.Sprintf("kernels/cpu: sgemm: %s is %d×%d as stored but ld%s = %d < %d", what, rows, cols, name, ld, cols))
	}
	if need := (rows-1)*ld + cols; have < need {
		panic(fmt.Sprintf("kernels/cpu: sgemm: %s is %d×%d with ld%s = %d, needing %d floats, but has %d", what, rows, cols, name, ld, need, have))
	}
}

// CheckSgemm panics, naming the bad argument, unless Sgemm's arguments describe
// matrices inside slices of la, lb and lc floats. Every Gemm implementation runs it.
func CheckSgemm(transA, transB bool, m, n, k, lda, ldb, ldc, la, lb, lc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("kernels/cpu: sgemm: negative size m=%d n=%d k=%d", m, n, k))
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	checkMatrix("a", "A", ar, ac, lda, la)
	checkMatrix("b", "B", br, bc, ldb, lb)
	checkMatrix("c", "C", m, n, ldc, lc)
}

// Name is "builtin-" and the micro-kernel's name.
func (g *gemmKernel) Name() string { return "builtin-" + g.name }

// Sgemm is the package's Sgemm on this micro-kernel.
func (g *gemmKernel) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	CheckSgemm(transA, transB, m, n, k, lda, ldb, ldc, len(a), len(b), len(c))
	g.run(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, m*n*k >= gemmSerial)
}

// SgemmBatched is the package's SgemmBatched on this micro-kernel.
func (g *gemmKernel) SgemmBatched(transA, transB bool, m, n, k int, alpha float32, a []float32, lda, strideA int, b []float32, ldb, strideB int, beta float32, c []float32, ldc, strideC int, batch int) {
	CheckSgemmBatched(transA, transB, m, n, k, lda, strideA, ldb, strideB, ldc, strideC, batch, len(a), len(b), len(c))
	if batch == 0 {
		return
	}
	if m*n*k >= gemmSerial {
		for i := range batch {
			g.run(transA, transB, m, n, k, alpha, a[i*strideA:], lda, b[i*strideB:], ldb, beta, c[i*strideC:], ldc, true)
		}
		return
	}
	// Small matrices: one goroutine per group of whole products.
	parallelFor(batch, max(1, gemmSerial/max(m*n*k, 1)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			g.run(transA, transB, m, n, k, alpha, a[i*strideA:], lda, b[i*strideB:], ldb, beta, c[i*strideC:], ldc, false)
		}
	})
}

// CheckSgemmBatched is CheckSgemm for SgemmBatched: every matrix of the batch must
// lie inside its slice.
func CheckSgemmBatched(transA, transB bool, m, n, k, lda, strideA, ldb, strideB, ldc, strideC, batch, la, lb, lc int) {
	if batch < 0 || strideA < 0 || strideB < 0 || strideC < 0 {
		panic(fmt.Sprintf("kernels/cpu: sgemm batched: negative batch %d or stride (%d, %d, %d)", batch, strideA, strideB, strideC))
	}
	if batch == 0 {
		return
	}
	last := batch - 1
	CheckSgemm(transA, transB, m, n, k, lda, ldb, ldc, la-min(last*strideA, la), lb-min(last*strideB, lb), lc-min(last*strideC, lc))
}

// scaleC sets C = beta·C, writing zeros when beta is 0 so NaNs in C do not survive.
func scaleC(m, n int, beta float32, c []float32, ldc int, parallel bool) {
	if beta == 1 {
		return
	}
	rows := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := c[i*ldc : i*ldc+n]
			if beta == 0 {
				clear(row)
				continue
			}
			for j := range row {
				row[j] *= beta
			}
		}
	}
	if !parallel {
		rows(0, m)
		return
	}
	parallelFor(m, max(1, grain/max(n, 1)), rows)
}

func (g *gemmKernel) run(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, parallel bool) {
	if m == 0 || n == 0 {
		return
	}
	scaleC(m, n, beta, c, ldc, parallel)
	if k == 0 || alpha == 0 {
		return
	}
	workers := 1
	if parallel {
		workers = runtime.GOMAXPROCS(0)
	}
	bp := g.packB.Get().(*[]float32)
	defer g.packB.Put(bp)
	bPack := *bp
	for jc := 0; jc < n; jc += g.nc {
		nc := min(g.nc, n-jc)
		nPanels := (nc + g.nr - 1) / g.nr
		for pc := 0; pc < k; pc += g.kc {
			kc := min(g.kc, k-pc)
			packPanels := func(lo, hi int) {
				for jp := lo; jp < hi; jp++ {
					packPanel(bPack[jp*kc*g.nr:], b, ldb, !transB, pc, kc, jc+jp*g.nr, min(g.nr, nc-jp*g.nr), g.nr)
				}
			}
			if workers > 1 {
				parallelFor(nPanels, 4, packPanels)
			} else {
				packPanels(0, nPanels)
			}
			// Tasks are (mc block of rows, range of B panels); cut the panels finer
			// when there are too few row blocks to keep every worker busy.
			mBlocks := (m + g.mc - 1) / g.mc
			split := min(nPanels, max(1, (2*workers+mBlocks-1)/mBlocks))
			if workers == 1 {
				split = 1
			}
			task := func(t int) {
				ic := (t / split) * g.mc
				mc := min(g.mc, m-ic)
				j0, j1 := nPanels*(t%split)/split, nPanels*(t%split+1)/split
				ap := g.packA.Get().(*[]float32)
				aPack := *ap
				mPanels := (mc + g.mr - 1) / g.mr
				for ip := range mPanels {
					packPanel(aPack[ip*kc*g.mr:], a, lda, transA, pc, kc, ic+ip*g.mr, min(g.mr, mc-ip*g.mr), g.mr)
				}
				for jp := j0; jp < j1; jp++ {
					cols := min(g.nr, nc-jp*g.nr)
					for ip := range mPanels {
						rows := min(g.mr, mc-ip*g.mr)
						cOff := (ic+ip*g.mr)*ldc + jc + jp*g.nr
						g.tile(kc, &aPack[ip*kc*g.mr], &bPack[jp*kc*g.nr], c, cOff, ldc, rows, cols, alpha)
					}
				}
				g.packA.Put(ap)
			}
			if workers > 1 {
				parallelTasks(mBlocks*split, task)
			} else {
				for t := range mBlocks * split {
					task(t)
				}
			}
		}
	}
}

// tile adds alpha·Ap·Bp into the rows×cols tile of C at cOff, through a scratch tile
// when it is smaller than the micro-kernel's.
func (g *gemmKernel) tile(kc int, ap, bp *float32, c []float32, cOff, ldc, rows, cols int, alpha float32) {
	if rows == g.mr && cols == g.nr {
		_ = c[cOff+(rows-1)*ldc+cols-1] // the kernel writes the whole tile
		g.micro(kc, ap, bp, unsafe.SliceData(c[cOff:]), ldc, alpha)
		return
	}
	tp := g.tiles.Get().(*[]float32)
	t := *tp
	clear(t)
	g.micro(kc, ap, bp, unsafe.SliceData(t), g.nr, alpha)
	for i := range rows {
		row := c[cOff+i*ldc : cOff+i*ldc+cols]
		for j := range row {
			row[j] += t[i*g.nr+j]
		}
	}
	g.tiles.Put(tp)
}

// packPanel packs a kc×w panel of a matrix into dst as kc steps of w floats: element
// (p, x) is src[(p0+p)·ld + x0+x] when steps are rows of src, else src[(x0+x)·ld +
// p0+p]. Only x < cols is read; the rest is zero-padded. A panel of op(A) is the
// transposed case of one of op(B).
func packPanel(dst, src []float32, ld int, stepRows bool, p0, kc, x0, cols, w int) {
	dst = dst[:kc*w]
	if cols < w {
		clear(dst)
	}
	if stepRows {
		for p := range kc {
			copy(dst[p*w:p*w+cols], src[(p0+p)*ld+x0:])
		}
		return
	}
	for x := range cols {
		row := src[(x0+x)*ld+p0 : (x0+x)*ld+p0+kc]
		for p, v := range row {
			dst[p*w+x] = v
		}
	}
}
