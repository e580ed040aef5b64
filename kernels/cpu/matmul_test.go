package cpu

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/subletml/sublet/kernels"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
)

// refMatmul is Matmul's definition over views in float64, at one dst index.
func refMatmul(dst, a, b view, alpha, beta float64, idx []int) float64 {
	r := len(idx)
	i, j := idx[r-2], idx[r-1]
	k := a.l.Shape[len(a.l.Shape)-1]
	ai := append([]int(nil), idx...)
	bi := append([]int(nil), idx...)
	s := 0.0
	for p := range k {
		ai[r-2], ai[r-1] = i, p
		bi[r-2], bi[r-1] = p, j
		s += a.get(ai) * b.get(bi)
	}
	s *= alpha
	if beta != 0 {
		s += beta * dst.get(idx)
	}
	return s
}

// recordingGemm is a stand-in system BLAS: the built-in GEMM, counting calls.
type recordingGemm struct {
	Gemm
	calls int
}

func (r *recordingGemm) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	r.calls++
	CheckSgemm(transA, transB, m, n, k, lda, ldb, ldc, len(a), len(b), len(c))
	r.Gemm.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func TestMatmulAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(110, 111))
	for trial := range 150 {
		batch := randShape(r, r.IntN(3), 3)
		m, k, n := 1+r.IntN(9), 1+r.IntN(9), 1+r.IntN(9)
		if trial%10 == 0 { // cross the output blocks of converted products
			m, n = outRows+3, 7
		}
		if trial%10 == 5 { // cross product64's blocks along k
			k = block64 + 5
		}
		shape := func(bs []int, x, y int) []int { return append(append([]int(nil), bs...), x, y) }
		gen := func() float64 { return float64(r.IntN(9)-4) / 4 }
		types := []dtype.DType{dtype.F32, dtype.F32, dtype.F16, dtype.BF16, dtype.F64}
		a := randView(r, pick(r, types), shape(broadcastShape(r, batch), m, k), gen)
		b := randView(r, pick(r, types), shape(broadcastShape(r, batch), k, n), gen)
		if r.IntN(3) == 0 {
			a = contiguousView(a.dt, a.l.Shape, gen)
			b = contiguousView(b.dt, b.l.Shape, gen)
		}
		dst := randView(r, pick(r, types), shape(batch, m, n), gen)
		alpha := []float64{1, 0.5, -2}[r.IntN(3)]
		beta := []float64{0, 1, 0.25}[r.IntN(3)]
		if beta == 0 {
			for i := range dst.f32 {
				dst.f32[i] = float32(math.NaN()) // not read when beta is 0
			}
			for i := range dst.f64 {
				dst.f64[i] = math.NaN()
			}
		}
		before := dst
		before.f64 = append([]float64(nil), dst.f64...)
		before.f32 = append([]float32(nil), dst.f32...)
		before.u16 = append([]uint16(nil), dst.u16...)
		gemm := Gemm(nil)
		rec := &recordingGemm{Gemm: Builtin()}
		if trial%2 == 1 {
			gemm = rec
		}
		Matmul(gemm, dst.op(), a.op(), b.op(), alpha, beta)
		forEachIndex(dst.l.Shape, func(idx []int) {
			want := roundTo(dst.dt, refMatmul(before, a, b, float64(alpha), float64(beta), idx))
			requireClose(t, dst.dt, want, dst.get(idx), "trial %d %v@%v->%v at %v", trial, a.dt, b.dt, dst.dt, idx)
		})
	}
}

func TestMatmulRoutesToSystemGemm(t *testing.T) {
	rec := &recordingGemm{Gemm: Builtin()}
	a := make([]float32, 2*3*4)
	b := make([]float32, 4*5)
	c := make([]float32, 2*3*5)
	for i := range a {
		a[i] = float32(i)
	}
	for i := range b {
		b[i] = float32(i % 3)
	}
	Matmul(rec, F32(c, kernels.Contiguous(2, 3, 5)), F32(a, kernels.Contiguous(2, 3, 4)), F32(b, kernels.Contiguous(4, 5)), 1, 0)
	assert.Equal(t, 2, rec.calls, "one call per batch matrix, weight shared")
	want := make([]float32, len(c))
	SgemmBatched(false, false, 3, 5, 4, 1, a, 4, 12, b, 5, 0, 0, want, 5, 15, 2)
	assert.Equal(t, want, c)

	// A transposed view of b still suits a BLAS; a float16 operand does not.
	bt := make([]float32, 5*4)
	Copy(F32(bt, kernels.Contiguous(5, 4)), F32(b, kernels.Layout{Shape: []int{5, 4}, Strides: []int{1, 5}}))
	rec.calls = 0
	Matmul(rec, F32(c, kernels.Contiguous(2, 3, 5)), F32(a, kernels.Contiguous(2, 3, 4)), F32(bt, kernels.Layout{Shape: []int{4, 5}, Strides: []int{1, 4}}), 1, 0)
	assert.Equal(t, 2, rec.calls)
	assert.Equal(t, want, c)
	// Single rows and columns with strides other than 1.
	row := make([]float32, 5)
	wantRow := make([]float32, 5)
	strided := kernels.Layout{Shape: []int{1, 4}, Strides: []int{0, 2}}
	Matmul(nil, F32(wantRow, kernels.Contiguous(1, 5)), F32(a, strided), F32(b, kernels.Contiguous(4, 5)), 1, 0)
	rec.calls = 0
	Matmul(rec, F32(row, kernels.Contiguous(1, 5)), F32(a, strided), F32(b, kernels.Contiguous(4, 5)), 1, 0)
	assert.Equal(t, 1, rec.calls)
	assert.Equal(t, wantRow, row)
	assert.Equal(t, float32(0*0+2*2+4*1+6*0), row[0])
	col := make([]float32, 3)
	wantCol := make([]float32, 3)
	colB := kernels.Layout{Shape: []int{4, 1}, Strides: []int{5, 7}}
	Matmul(nil, F32(wantCol, kernels.Contiguous(3, 1)), F32(a, kernels.Contiguous(3, 4)), F32(b, colB), 1, 0)
	rec.calls = 0
	Matmul(rec, F32(col, kernels.Contiguous(3, 1)), F32(a, kernels.Contiguous(3, 4)), F32(b, colB), 1, 0)
	assert.Equal(t, 1, rec.calls)
	assert.Equal(t, wantCol, col)

	h := make([]uint16, len(b))
	dtype.F32sToF16s(h, b)
	rec.calls = 0
	Matmul(rec, F32(c, kernels.Contiguous(2, 3, 5)), F32(a, kernels.Contiguous(2, 3, 4)), F16(h, kernels.Contiguous(4, 5)), 1, 0)
	assert.Equal(t, 0, rec.calls)
	assert.Equal(t, want, c)
}

func TestMatmulShapeErrors(t *testing.T) {
	x := make([]float32, 64)
	assert.PanicsWithValue(t, "kernels/cpu: matmul: shapes a [2 3], b [4 5] do not multiply into dst [2 5]", func() {
		Matmul(nil, F32(x, kernels.Contiguous(2, 5)), F32(x, kernels.Contiguous(2, 3)), F32(x, kernels.Contiguous(4, 5)), 1, 0)
	})
	assert.Panics(t, func() {
		Matmul(nil, F32(x, kernels.Contiguous(2)), F32(x, kernels.Contiguous(2, 3)), F32(x, kernels.Contiguous(3, 1)), 1, 0)
	})
	assert.Panics(t, func() {
		Matmul(nil, F32(x, kernels.Contiguous(3, 2, 2)), F32(x, kernels.Contiguous(2, 2, 2)), F32(x, kernels.Contiguous(2, 2)), 1, 0)
	}, "batch 2 does not broadcast to 3")
	assert.Panics(t, func() {
		Matmul(nil, I32(make([]int32, 4), kernels.Contiguous(2, 2)), F32(x, kernels.Contiguous(2, 2)), F32(x, kernels.Contiguous(2, 2)), 1, 0)
	})
}

func TestMatmulHalfLargeParallel(t *testing.T) {
	// Big enough to run the parallel driver with float16 packing and output blocks.
	r := rand.New(rand.NewPCG(112, 113))
	m, k, n := 130, 150, 600
	gen := func() float64 { return float64(r.IntN(5) - 2) }
	a := contiguousView(dtype.F16, []int{m, k}, gen)
	b := contiguousView(dtype.BF16, []int{k, n}, gen)
	dst := contiguousView(dtype.F16, []int{m, n}, gen)
	Matmul(nil, dst.op(), a.op(), b.op(), 1, 0)
	af := contiguousView(dtype.F32, []int{m, k}, func() float64 { return 0 })
	bf := contiguousView(dtype.F32, []int{k, n}, func() float64 { return 0 })
	Copy(af.op(), a.op())
	Copy(bf.op(), b.op())
	want := make([]float32, m*n)
	Sgemm(false, false, m, n, k, 1, af.f32, k, bf.f32, n, 0, want, n)
	for i, w := range want {
		require.Equal(t, dtype.F32ToF16(w), dst.u16[i], "at %d", i)
	}
}

// A training step's small kernels allocate nothing on the calling goroutine: a Fill, a
// Copy of a transposed view, a product of two matrices and the cross-entropy loss and
// its gradient once put their operands on the heap through the closure handed to the
// workers (a quarter of the bytes a small MLP step allocated), now only work that
// forks copies its state (forRange).
func TestSmallKernelsAllocateNothing(t *testing.T) {
	a, b, c, at := make([]float32, 64*32), make([]float32, 32*16), make([]float32, 64*16), make([]float32, 32*64)
	for i := range a {
		a[i] = float32(i%7) - 3
	}
	for i := range b {
		b[i] = float32(i%5) - 2
	}
	x, w, y := F32(a, kernels.Contiguous(64, 32)), F32(b, kernels.Contiguous(32, 16)), F32(c, kernels.Contiguous(64, 16))
	xt := F32(at, kernels.Contiguous(32, 64))
	transposed := F32(a, kernels.Layout{Shape: []int{32, 64}, Strides: []int{1, 32}})
	assert.Zero(t, testing.AllocsPerRun(100, func() { Fill(y, 0.5) }), "fill")
	assert.Zero(t, testing.AllocsPerRun(100, func() { Copy(xt, transposed) }), "copy")
	if !raceEnabled { // the GEMM's pooled state: sync.Pool drops items at random under the race detector
		assert.Zero(t, testing.AllocsPerRun(100, func() { Matmul(nil, y, x, w, 1, 0) }), "matmul")
	}
	assert.Equal(t, a[1], at[64], "the copy moved the transpose")
	// A loss over a batch of 64 rows of 16 classes, and its gradient.
	labels, lse := make([]int64, 64), make([]float32, 65)
	for i := range labels {
		labels[i] = int64(i % 16)
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		_, err := CrossEntropy(lse, c, labels, 64, 16, NoIgnore)
		require.NoError(t, err)
	}), "cross entropy")
	assert.Zero(t, testing.AllocsPerRun(100, func() { CrossEntropyBackward(a[:64*16], c, lse, labels, 64, 16, NoIgnore, 1) }), "its backward")
}

// The GEMM keeps its packing buffers through garbage collections: a parallel product
// after two collections allocates less than one buffer of packed A (a sync.Pool would
// have dropped them all, and each product after a collection allocated them again).
func TestGemmPackingBuffersOutliveCollections(t *testing.T) {
	const m, n, k = 256, 256, 256
	a, b, c := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
	g := bestGemmKernel()
	product := func() { g.Sgemm(false, false, m, n, k, 1, a, k, b, n, 0, c, n) }
	product()
	runtime.GC()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	product()
	runtime.ReadMemStats(&after)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(g.mc*g.kc*4), "bytes a product allocates after two collections")
}

// A product on several goroutines allocates nothing once warm, by either driver: the
// tasks' shared state and the functions the workers run are pooled, made once.
// (testing.AllocsPerRun would run it on one thread.)
func TestParallelProductAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops the GEMM's pooled state at random under the race detector")
	}
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one thread: no parallel product")
	}
	defer func(w int) { gemmChunkWorkers = w }(gemmChunkWorkers)
	g := bestGemmKernel()
	for _, m := range []int{8, 256} { // runColumns (a few rows), run
		for _, chunks := range []int{math.MaxInt, 2} { // run's grid, its chunks
			gemmChunkWorkers = chunks
			const n, k, runs = 256, 256, 50
			a, b, c := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
			product := func() { g.Sgemm(false, false, m, n, k, 1, a, k, b, n, 0, c, n) }
			assert.Less(t, float64(mallocs(product, 1, runs))/runs, 0.5, "heap objects per product of %d rows (chunks from %d workers)", m, chunks)
		}
	}
}
