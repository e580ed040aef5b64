package cpu

import (
	"fmt"
	"sync"
)

// Sgemm computes C = alpha·op(A)·op(B) + beta·C for row-major matrices, as CBLAS's
// cblas_sgemm with CblasRowMajor: op(A) is m×k, op(B) is k×n, C is m×n with ldc floats
// between rows. A is stored m×k (lda ≥ k), or k×m when transA (lda ≥ m); B is stored
// k×n (ldb ≥ n), or n×k when transB (ldb ≥ k). When beta is 0, C is not read, so it
// may hold NaNs. C must not overlap A or B.
//
// The work runs through the fastest micro-kernel the CPU has (AVX-512, AVX2+FMA, NEON
// or pure Go), parallel over blocks of C. Each element of C accumulates its k products in
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

//go:generate go run gemm_gen.go

// Gemm is a single-precision matrix multiply following Sgemm's contract: the built-in
// one (Builtin) or a system BLAS that package kernels/cpu/blas loads at run time.
type Gemm interface {
	// Name says which implementation runs: "builtin-avx512", "openblas", …
	Name() string
	Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)
	SgemmBatched(transA, transB bool, m, n, k int, alpha float32, a []float32, lda, strideA int, b []float32, ldb, strideB int, beta float32, c []float32, ldc, strideC int, batch int)
}

// Builtin returns the built-in GEMM, the one Sgemm and SgemmBatched run: the fastest
// micro-kernel this CPU has ("builtin-avx512", "builtin-avx2", "builtin-neon" or
// "builtin-go").
func Builtin() Gemm { return bestGemmKernel() }

var bestGemmKernel = sync.OnceValue(func() *gemmKernel { return gemmKernels()[0] })

// gemmKernel is a micro-kernel with the blocking that suits it: C is computed in
// mc×nc blocks over kc-long slices of k; A is packed into mr-row panels, B into nr-
// column panels, both zero-padded to whole panels.
type gemmKernel struct {
	name       string
	mr, nr     int
	kc, mc, nc int
	micro      func(k int, a, b, c *float32, ldc int, alpha float32)
	// store sets C = alpha·Ap·Bp without reading C (nil: no such kernel; C is then
	// cleared first): the first kc slice of a product with beta 0.
	store        func(k int, a, b, c *float32, ldc int, alpha float32)
	aBufs        packBuffers // mc·kc floats: a task's chunk of packed A
	groups       packBuffers // runColumns' packed A, grown as needed
	columns      packBuffers // a task's packed B (run's and runColumns'), grown as needed
	tileBufs     sync.Pool   // *[]float32 of mr·nr floats for partial tiles
	shares       sync.Pool   // *gemmShare of run's products
	columnShares sync.Pool   // *columnShare of runColumns' products
}

// packBuffers keeps the packing buffers of a gemmKernel's tasks from one product to
// the next. A sync.Pool would not: the garbage collector empties it, and at 16 threads
// the buffers it dropped every other collection (hundreds of KB each, allocated
// again, some grown again) were most of a small training step's garbage, each bringing
// the next collection closer. It holds as many buffers as tasks ever ran at once (the
// workers and the calling goroutines), no more.
type packBuffers struct {
	mu   sync.Mutex
	free []*[]float32 // guarded by mu
	size int          // floats of a new buffer (0: its user grows it); set at creation
}

// get returns a buffer, a kept one if there is any.
func (p *packBuffers) get() *[]float32 {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return b
	}
	p.mu.Unlock()
	b := make([]float32, p.size)
	return &b
}

// put keeps b for a later get.
func (p *packBuffers) put(b *[]float32) {
	p.mu.Lock()
	p.free = append(p.free, b)
	p.mu.Unlock()
}

func newGemmKernel(name string, mr, nr, kc, mc, nc int, micro, store func(k int, a, b, c *float32, ldc int, alpha float32)) *gemmKernel {
	g := &gemmKernel{name: name, mr: mr, nr: nr, kc: kc, mc: mc, nc: nc, micro: micro, store: store}
	g.aBufs.size = mc * kc
	g.tileBufs.New = func() any { s := make([]float32, mr*nr); return &s }
	g.shares.New = func() any { return newGemmShare() }
	g.columnShares.New = func() any { return newColumnShare() }
	return g
}

// gemmGrain is the fewest multiply-adds a goroutine of a parallel product gets
// (workers): a product below 2·gemmGrain stays on the calling goroutine. At 2 threads
// with the worker awake and each task packing its own operands, 96³ (two shares of
// 0.44M) ran as fast as on one thread (11-16 µs against 12-13.5), 128³ (1M each) 1.4×
// faster (20-21 µs against 27-31), the tiny training case's 64·256·256 1.2×, its
// 256·256·64 (a weight's gradient) 1.6× (BenchmarkWorkers, BenchmarkFork). On the
// 16-core host the weight's gradient took 17 µs on 8 goroutines (512K each) and 32 on
// the 4 that 1M a goroutine gave it. The tests lower it (and gemmWake) to exercise the
// parallel driver on small matrices.
var gemmGrain = 1 << 19

// gemmWake is the work from which a product wakes the pool's sleeping workers to run
// it; a smaller one runs on the calling goroutine and the workers awake, and within a
// burst of forks rouses the others for the products that follow. Waking a worker
// costs the forking goroutine 17-20 µs, and the worker comes 60-165 µs later (2-core
// dev machine): when a product's tasks still waited for each other, waking one made
// 128³ and 256³ slower than one thread, 384³ 1.15-1.4× and 512³ 1.4-1.5× faster
// (BenchmarkForkAsleep).
var gemmWake = 32 << 20

// gemmWorkers is how many goroutines a product of work multiply-adds runs on: as many
// as workers gives it, and below gemmWake no more than the calling one and the
// workers awake.
func gemmWorkers(work int) int {
	p := workers(work, gemmGrain)
	if p == 1 || work >= gemmWake {
		return p
	}
	n := awake()
	if following() && n < p-1 {
		hire(nil, p-1-n, false)
	}
	return min(p, 1+n)
}

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
	av, bv := sgemmViews(transA, transB, a, lda, b, ldb)
	g.run(m, n, k, alpha, av, bv, beta, c, ldc, true, gemmEpilogue{})
}

// SgemmBatched is the package's SgemmBatched on this micro-kernel.
func (g *gemmKernel) SgemmBatched(transA, transB bool, m, n, k int, alpha float32, a []float32, lda, strideA int, b []float32, ldb, strideB int, beta float32, c []float32, ldc, strideC int, batch int) {
	CheckSgemmBatched(transA, transB, m, n, k, lda, strideA, ldb, strideB, ldc, strideC, batch, len(a), len(b), len(c))
	if batch == 0 {
		return
	}
	av, bv := sgemmViews(transA, transB, a, lda, b, ldb)
	batches(m, n, k, batch, func(i int, parallel bool) {
		ai, bi := av, bv
		ai.off, bi.off = i*strideA, i*strideB
		g.run(m, n, k, alpha, ai, bi, beta, c[i*strideC:], ldc, parallel, gemmEpilogue{})
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

// sgemmViews describes Sgemm's A and B as strided float32 matrices.
func sgemmViews(transA, transB bool, a []float32, lda int, b []float32, ldb int) (av, bv matView) {
	av, bv = f32View(a, lda, 1), f32View(b, ldb, 1)
	if transA {
		av.rs, av.cs = 1, lda
	}
	if transB {
		bv.rs, bv.cs = 1, ldb
	}
	return av, bv
}

// batches calls product(i, parallel) for every i < batch: one after the other, each
// parallel inside, when the products are large enough to share; in parallel, each on
// one goroutine, when they are not.
func batches(m, n, k, batch int, product func(i int, parallel bool)) {
	if workers(m*n*k, gemmGrain) > 1 {
		for i := range batch {
			product(i, true)
		}
		return
	}
	parallelFor(batch, max(1, gemmGrain/max(m*n*k, 1)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			product(i, false)
		}
	})
}
