package cpu

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refGemm is the definition of Sgemm in float64 loops.
func refGemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			s := 0.0
			for p := range k {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(av) * float64(bv)
			}
			s *= float64(alpha)
			if beta != 0 {
				s += float64(beta) * float64(c[i*ldc+j])
			}
			out[i*n+j] = s
		}
	}
	return out
}

type gemmCase struct {
	transA, transB bool
	m, n, k        int
	lda, ldb, ldc  int
	alpha, beta    float32
	a, b, c        []float32
}

func randGemmCase(r *rand.Rand, m, n, k int) gemmCase {
	g := gemmCase{transA: r.IntN(2) == 0, transB: r.IntN(2) == 0, m: m, n: n, k: k}
	ar, ac := m, k
	if g.transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if g.transB {
		br, bc = n, k
	}
	g.lda, g.ldb, g.ldc = ac+r.IntN(3), bc+r.IntN(3), n+r.IntN(3)
	fill := func(rows, ld int) []float32 {
		s := make([]float32, max(rows*ld, 1))
		for i := range s {
			s[i] = float32(r.IntN(17)-8) / 8 // exact products and sums in float32
		}
		return s
	}
	g.a, g.b, g.c = fill(ar, g.lda), fill(br, g.ldb), fill(m, g.ldc)
	g.alpha = []float32{1, -0.5, 2}[r.IntN(3)]
	g.beta = []float32{0, 1, 0.5}[r.IntN(3)]
	if g.beta == 0 {
		for i := range g.c {
			g.c[i] = float32(math.NaN()) // beta 0 must not read C
		}
	}
	return g
}

func (g gemmCase) check(t *testing.T, kern *gemmKernel, batchOffset int) {
	t.Helper()
	want := refGemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc)
	c := append([]float32(nil), g.c...)
	kern.Sgemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, c, g.ldc)
	for i := range g.m {
		for j := range g.n {
			require.InDelta(t, want[i*g.n+j], c[i*g.ldc+j], 1e-5*(1+math.Abs(want[i*g.n+j])),
				"%s %dx%dx%d tA=%v tB=%v alpha=%v beta=%v at (%d,%d)", kern.name, g.m, g.n, g.k, g.transA, g.transB, g.alpha, g.beta, i, j)
		}
		for j := g.n; j < g.ldc && i*g.ldc+j < len(c); j++ {
			require.Equal(t, math.Float32bits(g.c[i*g.ldc+j]), math.Float32bits(c[i*g.ldc+j]), "wrote past n at (%d,%d)", i, j)
		}
	}
}

func TestSgemmAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 41))
	for _, kern := range gemmKernels() {
		t.Run(kern.name, func(t *testing.T) {
			for range 150 {
				randGemmCase(r, r.IntN(40), r.IntN(70), r.IntN(40)).check(t, kern, 0)
			}
			// Sizes crossing the blocking: several kc slices, mc blocks and nr panels,
			// with edges everywhere.
			for _, s := range [][3]int{{kern.mc + 3, 2*kern.nr + 5, kern.kc + 7}, {2*kern.mr + 1, 300, 2*kern.kc + 1}, {130, 67, 3}, {1, 129, 513}} {
				randGemmCase(r, s[0], s[1], s[2]).check(t, kern, 0)
			}
		})
	}
}

func TestSgemmLargeNC(t *testing.T) {
	// Crosses the nc blocking of the pure-Go kernel (the smallest), so jc loops run.
	r := rand.New(rand.NewPCG(42, 43))
	kern := goGemmKernel()
	randGemmCase(r, 9, kern.nc+33, 17).check(t, kern, 0)
}

func TestSgemmEdgeSizes(t *testing.T) {
	c := []float32{1, 2, 3, 4}
	Sgemm(false, false, 2, 2, 0, 1, nil, 0, nil, 2, 3, c, 2)
	assert.Equal(t, []float32{3, 6, 9, 12}, c, "k = 0 scales C by beta")
	Sgemm(false, false, 2, 2, 3, 0, make([]float32, 6), 3, make([]float32, 6), 2, 0, c, 2)
	assert.Equal(t, []float32{0, 0, 0, 0}, c, "alpha = 0, beta = 0 zeroes C")
	Sgemm(false, false, 0, 5, 5, 1, nil, 5, make([]float32, 25), 5, 0, nil, 5)
	assert.PanicsWithValue(t, "kernels/cpu: sgemm: A is 2×3 with lda = 3, needing 6 floats, but has 5", func() {
		Sgemm(false, false, 2, 2, 3, 1, make([]float32, 5), 3, make([]float32, 6), 2, 0, c, 2)
	})
	assert.PanicsWithValue(t, "kernels/cpu: sgemm: B is 2×3 as stored but ldb = 2 < 3", func() {
		Sgemm(false, true, 2, 2, 3, 1, make([]float32, 6), 3, make([]float32, 6), 2, 0, c, 2)
	})
}

func TestSgemmBatched(t *testing.T) {
	r := rand.New(rand.NewPCG(44, 45))
	for _, big := range []bool{false, true} {
		m, n, k, batch := 5, 7, 3, 9
		if big {
			m, n, k, batch = 70, 65, 66, 3
		}
		g := randGemmCase(r, m, n, k)
		sizeA, sizeB := len(g.a), len(g.b)
		strideA := []int{0, sizeA}[r.IntN(2)] // 0: one A shared by the batch
		strideB := sizeB
		strideC := len(g.c) + 2
		a := make([]float32, sizeA+strideA*(batch-1))
		b := make([]float32, sizeB+strideB*(batch-1))
		c := make([]float32, len(g.c)+strideC*(batch-1))
		for i := range a {
			a[i] = float32(r.IntN(9) - 4)
		}
		for i := range b {
			b[i] = float32(r.IntN(9) - 4)
		}
		for i := range c {
			c[i] = float32(r.IntN(9) - 4)
		}
		before := append([]float32(nil), c...)
		SgemmBatched(g.transA, g.transB, m, n, k, g.alpha, a, g.lda, strideA, b, g.ldb, strideB, 1, c, g.ldc, strideC, batch)
		for i := range batch {
			want := refGemm(g.transA, g.transB, m, n, k, g.alpha, a[i*strideA:], g.lda, b[i*strideB:], g.ldb, 1, before[i*strideC:], g.ldc)
			for x := range m {
				for y := range n {
					require.InDelta(t, want[x*n+y], c[i*strideC+x*g.ldc+y], 1e-3, "batch %d (%d,%d)", i, x, y)
				}
			}
		}
	}
}

func TestSgemmDeterministic(t *testing.T) {
	// Inputs whose sums round, computed twice in parallel: the same bits.
	r := rand.New(rand.NewPCG(46, 47))
	m, n, k := 150, 170, 600
	a := make([]float32, m*k)
	b := make([]float32, k*n)
	for i := range a {
		a[i] = float32(r.NormFloat64())
	}
	for i := range b {
		b[i] = float32(r.NormFloat64())
	}
	c1 := make([]float32, m*n)
	c2 := make([]float32, m*n)
	Sgemm(false, false, m, n, k, 1, a, k, b, n, 0, c1, n)
	Sgemm(false, false, m, n, k, 1, a, k, b, n, 0, c2, n)
	assert.Equal(t, c1, c2)
}

// Products spread over 1 to 16 workers, by a grid of rows of A's panels by columns of
// B's (gemmGrid) and by ranges of columns (runColumns, with its A packed in one group
// or in several), give the same bits, and the bits of the serial product.
func TestSgemmBitsAcrossGOMAXPROCS(t *testing.T) {
	r := rand.New(rand.NewPCG(48, 49))
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	defer func(g int) { gemmGroup = g }(gemmGroup)
	for _, s := range [][3]int{{64, 300, 800}, {200, 170, 600}, {600, 70, 400}, {13, 1000, 50}} {
		for _, group := range []int{gemmGroup, 1} { // 1: a kc slice per group
			gemmGroup = group
			g := randGemmCase(r, s[0], s[1], s[2])
			for i := range g.a {
				g.a[i] = float32(r.NormFloat64())
			}
			for i := range g.b {
				g.b[i] = float32(r.NormFloat64())
			}
			var first []float32
			for _, procs := range []int{1, 2, 3, 4, 5, 8, 16} {
				runtime.GOMAXPROCS(procs)
				c := append([]float32(nil), g.c...)
				Sgemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, c, g.ldc)
				if first == nil {
					first = c
					continue
				}
				for i := range c {
					if math.Float32bits(c[i]) != math.Float32bits(first[i]) {
						t.Fatalf("%v group %d: GOMAXPROCS %d gives %v at %d, GOMAXPROCS 1 %v", s, group, procs, c[i], i, first[i])
					}
				}
			}
			want := refGemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc)
			for i := range g.m {
				for j := range g.n {
					require.InDelta(t, want[i*g.n+j], first[i*g.ldc+j], 1e-3, "%v at (%d,%d)", s, i, j)
				}
			}
		}
	}
}

// run's tasks each pack their own parts of A and B: on a kernel blocked small enough
// for odd sizes to cross many kc slices, mc blocks and nc blocks (the last one
// narrower than the grid has columns of tasks; narrowed further where a task's share
// of B is past gemmShareB), every transposition at 2, 3, 4 and 7 workers gives the
// bits of 1 worker, in every kernel.
func TestSgemmGridBlocksBits(t *testing.T) {
	r := rand.New(rand.NewPCG(50, 51))
	defer func(s, w int) { gemmShareB, gemmChunkWorkers = s, w }(gemmShareB, gemmChunkWorkers)
	gemmChunkWorkers = math.MaxInt
	for _, kern := range gemmKernels() {
		small := newGemmKernel(kern.name, kern.mr, kern.nr, 48, 2*kern.mr, 5*kern.nr, kern.micro, kern.store)
		// As they are, and with B's blocks narrowed to a panel per task.
		for _, share := range []int{gemmShareB, 48 * kern.nr} {
			gemmShareB = share
			gridBlocksBits(t, r, kern, small)
		}
	}
}

// Products scheduled by chunks of A's rows (gemmShare.chunks) from 2 workers on give
// the bits of 1 worker in the cases of TestSgemmGridBlocksBits: column blocks as many
// as half the workers, and (the floor on a block's width lowered to a panel) B's
// packing for every kc slice limited to blocks of one, two and three panels: more
// blocks than workers, workers moving from block to block. chunkBlocks leaves to the
// grid a product whose blocks would be narrower than gemmChunkColumns.
func TestSgemmChunksBits(t *testing.T) {
	r := rand.New(rand.NewPCG(54, 55))
	defer func(b, w, c int) { gemmChunkB, gemmChunkWorkers, gemmChunkColumns = b, w, c }(gemmChunkB, gemmChunkWorkers, gemmChunkColumns)
	floor := gemmChunkColumns
	gemmChunkWorkers = 2
	for _, kern := range gemmKernels() {
		small := newGemmKernel(kern.name, kern.mr, kern.nr, 48, 2*kern.mr, 5*kern.nr, kern.micro, kern.store)
		gemmChunkColumns = kern.nr
		for _, panels := range []int{1 << 20, 1, 2, 3} {
			gemmChunkB = panels * 300 * kern.nr // the cases' k: 49 to 300
			gridBlocksBits(t, r, kern, small)
		}
		gemmChunkB, gemmChunkColumns = 1<<18, floor
		least := (floor + kern.nr - 1) / kern.nr // panels
		require.Equal(t, 0, small.chunkBlocks(64, gemmChunkB/(least*kern.nr)+1, 16), "%s: a product whose blocks would be narrower than gemmChunkColumns", kern.name)
		require.Equal(t, 0, small.chunkBlocks(1024, 1024, 1), "%s: one worker", kern.name)
		if kern.nr == 32 {
			require.Equal(t, 8, small.chunkBlocks(1024, 1024, 16), "%s: 1024 columns at 16 workers", kern.name)
			require.Equal(t, 4, small.chunkBlocks(1024, 1024, 4), "%s: 1024 columns at 4 workers: blocks of 8 panels", kern.name)
			require.Equal(t, 0, small.chunkBlocks(4096, 4096, 16), "%s: k = 4096: blocks of 2 panels", kern.name)
		}
		if kern.nr == 16 {
			require.Equal(t, 0, small.chunkBlocks(4096, 4096, 16), "%s: k = 4096: blocks of 4 panels, 64 columns", kern.name)
		}
	}
}

func gridBlocksBits(t *testing.T, r *rand.Rand, kern, small *gemmKernel) {
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	for _, s := range [][3]int{{203, 7*kern.nr + 5, 157}, {gemmMinRows, 2 * kern.nr, 49}, {331, kern.nr + 1, 300}} {
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			g := randGemmCase(r, s[0], s[1], s[2])
			g.transA, g.transB = tr[0], tr[1]
			g.lda, g.ldb = s[2], s[1]
			if g.transA {
				g.lda = s[0]
			}
			if g.transB {
				g.ldb = s[2]
			}
			a, b := make([]float32, s[0]*s[2]), make([]float32, s[2]*s[1])
			for i := range a {
				a[i] = float32(r.NormFloat64())
			}
			for i := range b {
				b[i] = float32(r.NormFloat64())
			}
			g.a, g.b = a, b
			var first []float32
			for _, procs := range []int{1, 2, 3, 4, 7} {
				runtime.GOMAXPROCS(procs)
				c := append([]float32(nil), g.c...)
				small.Sgemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, c, g.ldc)
				if first == nil {
					first = c
					want := refGemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc)
					for i := range g.m {
						for j := range g.n {
							require.InDelta(t, want[i*g.n+j], c[i*g.ldc+j], 1e-3*(1+math.Abs(want[i*g.n+j])), "%s %v at (%d,%d)", kern.name, s, i, j)
						}
					}
					continue
				}
				for i := range c {
					if math.Float32bits(c[i]) != math.Float32bits(first[i]) {
						t.Fatalf("%s %v tA=%v tB=%v: %d workers give %v at %d, 1 worker %v", kern.name, s, g.transA, g.transB, procs, c[i], i, first[i])
					}
				}
			}
		}
	}
}

// gemmGrid on the AVX-512 kernel's blocking (14×32 tiles, kc 384), gemmPerWorker
// tasks a worker: two workers cut 256 and 1024 into 2×2 tasks and 2048 into 1×4 (each
// task's share of B under gemmShareB), 16 workers 1024 and 2048 into 4×8; one worker
// runs one task.
func TestGemmGrid(t *testing.T) {
	grid := func(n, workers int) [2]int {
		rb, cb := gemmGrid((n+13)/14, (n+31)/32, max(1, gemmShareB/(min(n, 384)*32)), 32.0/14, workers)
		return [2]int{rb, cb}
	}
	assert.Equal(t, [2]int{2, 2}, grid(256, 2))
	assert.Equal(t, [2]int{2, 2}, grid(1024, 2))
	assert.Equal(t, [2]int{1, 4}, grid(2048, 2))
	assert.Equal(t, [2]int{4, 8}, grid(1024, 16))
	assert.Equal(t, [2]int{4, 8}, grid(2048, 16))
	assert.Equal(t, [2]int{1, 1}, grid(1024, 1))
}

// gemmRowSplit cuts A's panels into blocks from large to small that cover them in
// order, none empty, equal where there are fewer than two panels a block or the product
// does not taper.
func TestGemmRowSplit(t *testing.T) {
	taper := true
	blocks := func(panels, rb int) []int {
		var sizes []int
		for i := range rb {
			p0, p1 := gemmRowSplit(panels, i, rb, taper), gemmRowSplit(panels, i+1, rb, taper)
			sizes = append(sizes, p1-p0)
		}
		return sizes
	}
	assert.Equal(t, []int{26, 21, 16, 11}, blocks(74, 4)) // 1024 rows of 14, 16 workers
	assert.Equal(t, []int{26, 11}, blocks(37, 2))
	assert.Equal(t, []int{1, 1, 2}, blocks(4, 3)) // fewer than two panels a block: equal
	assert.Equal(t, []int{9}, blocks(9, 1))
	for panels := 1; panels <= 80; panels++ {
		for rb := 1; rb <= min(panels, 16); rb++ {
			sizes := blocks(panels, rb)
			sum := 0
			for i, n := range sizes {
				require.Positive(t, n, "panels %d, rb %d: block %d of %v", panels, rb, i, sizes)
				if i > 0 {
					require.LessOrEqual(t, n, sizes[i-1]+1, "panels %d, rb %d: %v", panels, rb, sizes)
				}
				sum += n
			}
			require.Equal(t, panels, sum, "panels %d, rb %d: %v", panels, rb, sizes)
			require.Equal(t, 0, gemmRowSplit(panels, 0, rb, true))
		}
	}
	taper = false // one task a worker: equal blocks
	assert.Equal(t, []int{18, 19, 18, 19}, blocks(74, 4))
}

func TestGemmKernelName(t *testing.T) {
	ks := gemmKernels()
	assert.Equal(t, "builtin-"+ks[0].name, Builtin().Name())
	assert.Equal(t, "go", ks[len(ks)-1].name)
}

// The vector moves of the packing (each transpose this CPU has, of runs along p; the
// copy of rows along x) write what the scalar packing does: every width, column count
// and depth, with the floats around the panel left alone.
func TestPackPanelVectorMoves(t *testing.T) {
	if len(transposers) == 0 || copyRows == nil {
		t.Skip("no vector moves on this CPU")
	}
	r := rand.New(rand.NewPCG(44, 45))
	const ld = 53 // the other stride
	src := make([]float32, 45*ld)
	for i := range src {
		src[i] = float32(r.NormFloat64())
	}
	vt, vc := transposeBlock, copyRows
	defer func() { transposeBlock, copyRows = vt, vc }()
	for _, tr := range transposers {
		for _, runs := range []bool{true, false} { // along p (transposed), along x (copied)
			sp, sx := 1, ld
			if !runs {
				sp, sx = ld, 1
			}
			for _, w := range []int{4, 6, 8, 14, 16, 32} {
				for cols := 1; cols <= w; cols++ {
					for _, kc := range []int{1, 7, 8, 9, 15, 16, 17, 40} {
						panel := func(vector bool) []float32 {
							transposeBlock, copyRows = transposer{}, nil
							if vector {
								transposeBlock, copyRows = tr, vc
							}
							dst := make([]float32, kc*w+3)
							for i := range dst {
								dst[i] = float32(math.NaN())
							}
							packPanel(dst, f32View(src, 1, ld), sp, sx, 5, kc, 2, cols, w)
							return dst
						}
						want, got := panel(false), panel(true)
						for i := range want {
							if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
								t.Fatalf("transpose %d runs %v w %d cols %d kc %d at %d: %v, want %v", tr.n, runs, w, cols, kc, i, got[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}

// packPanels writes what packPanel writes panel by panel: several panels at once
// (copied a row block at a time where the steps' floats are contiguous), a last panel
// partly filled, depths across packRows, and nothing past the panels.
func TestPackPanelsAsPanelByPanel(t *testing.T) {
	r := rand.New(rand.NewPCG(46, 47))
	const ld = 211
	src := make([]float32, 140*ld)
	for i := range src {
		src[i] = float32(r.NormFloat64())
	}
	for _, runs := range []bool{true, false} {
		sp, sx := 1, ld
		if !runs {
			sp, sx = ld, 1
		}
		for _, w := range []int{14, 16, 32} {
			for _, cols := range []int{1, w - 1, w, w + 1, 3*w - 5, 4 * w} {
				for _, kc := range []int{1, packRows - 1, packRows, packRows + 3, 3*packRows + 5} {
					panels := (cols + w - 1) / w
					want, got := make([]float32, panels*kc*w+3), make([]float32, panels*kc*w+3)
					for i := range want {
						want[i], got[i] = float32(math.NaN()), float32(math.NaN())
					}
					for i := range panels {
						packPanel(want[i*kc*w:], f32View(src, 1, ld), sp, sx, 4, kc, 3+i*w, min(w, cols-i*w), w)
					}
					packPanels(got, f32View(src, 1, ld), sp, sx, 4, kc, 3, cols, w)
					for i := range want {
						if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
							t.Fatalf("runs along p %v, w %d, cols %d, kc %d: at %d %v, want %v", runs, w, cols, kc, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// On a kernel blocked small (several chunks a kc slice, several kc slices, several nc
// blocks), 16 workers in a grid of gemmPerWorker·16 tasks, and 8 and 12 workers, give the
// bits of 1 worker in every transposition, in every kernel (the grid at every count:
// no chunks, which TestSgemmChunksBits covers).
func TestSgemmGridBits(t *testing.T) {
	r := rand.New(rand.NewPCG(52, 53))
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	defer func(w int) { gemmChunkWorkers = w }(gemmChunkWorkers)
	gemmChunkWorkers = math.MaxInt
	for _, kern := range gemmKernels() {
		small := newGemmKernel(kern.name, kern.mr, kern.nr, 48, 2*kern.mr, 5*kern.nr, kern.micro, kern.store)
		m, n, k := 18*kern.mr-2, 10*kern.nr+3, 157
		rb, cb := gemmGrid(18, 5, max(1, gemmShareB/(48*kern.nr)), float64(kern.nr)/float64(kern.mr), 16)
		require.Equal(t, gemmPerWorker*16, rb*cb, "%s: the grid's tasks at 16 workers", kern.name)
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			g := randGemmCase(r, m, n, k)
			g.transA, g.transB, g.lda, g.ldb = tr[0], tr[1], k, n
			if g.transA {
				g.lda = m
			}
			if g.transB {
				g.ldb = k
			}
			g.a, g.b = make([]float32, m*k), make([]float32, k*n)
			for i := range g.a {
				g.a[i] = float32(r.NormFloat64())
			}
			for i := range g.b {
				g.b[i] = float32(r.NormFloat64())
			}
			var first []float32
			for _, procs := range []int{1, 16, 8, 12} {
				runtime.GOMAXPROCS(procs)
				c := append([]float32(nil), g.c...)
				small.Sgemm(g.transA, g.transB, m, n, k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, c, g.ldc)
				if first != nil {
					for i := range c {
						if math.Float32bits(c[i]) != math.Float32bits(first[i]) {
							t.Fatalf("%s tA=%v tB=%v: %d workers give %v at %d, 1 worker %v", kern.name, g.transA, g.transB, procs, c[i], i, first[i])
						}
					}
					continue
				}
				first = c
				want := refGemm(g.transA, g.transB, m, n, k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc)
				for i := range m {
					for j := range n {
						require.InDelta(t, want[i*n+j], c[i*g.ldc+j], 1e-3*(1+math.Abs(want[i*n+j])), "%s at (%d,%d)", kern.name, i, j)
					}
				}
			}
		}
	}
}
