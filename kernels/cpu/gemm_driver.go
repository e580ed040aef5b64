package cpu

import (
	"sync/atomic"
	"unsafe"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// matView is a strided matrix the GEMM driver packs from: element (i, j) is element
// off + i·rs + j·cs of the operand's buffer, which holds float32, float16 or bfloat16.
type matView struct {
	o           Operand // only dt, data and n are used
	off, rs, cs int
}

func f32View(s []float32, rs, cs int) matView {
	return matView{o: Operand{dt: dtype.F32, data: unsafe.Pointer(unsafe.SliceData(s)), n: len(s)}, rs: rs, cs: cs}
}

// scaleC sets columns [j0, j1) of C's m rows to beta·C, writing zeros when beta is 0
// so NaNs in C do not survive.
func scaleC(m int, beta float32, c []float32, ldc, j0, j1 int, parallel bool) {
	if beta == 1 {
		return
	}
	rows := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := c[i*ldc+j0 : i*ldc+j1]
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
	parallelFor(m, max(1, grain/max(j1-j0, 1)), rows)
}

// gemmMinRows is the fewest rows of C under which a parallel product is left to
// runColumns (a batch of 64 samples): it packs A once for several kc slices.
const gemmMinRows = 96

// run computes C = alpha·A·B + beta·C for an m×k A, a k×n B and a row-major float32 C
// (ldc floats per row), blocked for the micro-kernel and, when parallel, spread over
// the goroutines gemmWorkers gives it, by blocks of C. Every element of C sums its
// products in k order, one kc slice after the other, however the blocks are spread.
//
// C's tiles are cut into a grid of tasks (gemmGrid): rows of A's panels (largest first,
// gemmRowSplit) by columns of B's, gemmPerWorker tasks a worker, which the workers
// claim in order as they come (parallelTasks). Each task packs its own columns of B,
// one kc slice after the other, and runs its rows of A against them in mc-row chunks
// that stay in its L2, which it packs too; no task waits for another, so a goroutine
// that comes late, or loses its thread for a while (to the garbage collector's workers
// or another process), holds up no other: the others take the tasks it has not
// claimed. Sharing the packing (each task packing a part, the others waiting for it)
// costs less packing but couples the tasks: on 2 cores it made 128³ to 256³ products
// 15-35 % slower and 512³ 3-6 % slower than each task packing its own
// (docs/benchmarks.md). Where a task's share of an nc-wide block of B would not stay
// in its L2 (gemmShareB), the blocks are narrowed until it does. From gemmChunkWorkers
// workers on, a product whose column blocks of at least gemmChunkColumns columns fit
// gemmChunkB packed for every kc slice is scheduled by chunks of A's rows instead
// (chunks, chunkBlocks).
func (g *gemmKernel) run(m, n, k int, alpha float32, a, b matView, beta float32, c []float32, ldc int, parallel bool, ep gemmEpilogue) {
	if m == 0 || n == 0 {
		return
	}
	workers := 1
	if parallel {
		workers = gemmWorkers(m * n * k)
	}
	if k == 0 || alpha == 0 {
		scaleC(m, beta, c, ldc, 0, n, parallel)
		ep.apply(c, ldc, 0, m, 0, n)
		return
	}
	if workers > 1 && m < gemmMinRows {
		g.runColumns(m, n, k, alpha, a, b, beta, c, ldc, workers, ep)
		return
	}
	set := beta == 0 && g.store != nil // the first kc slice sets C
	if !set {
		scaleC(m, beta, c, ldc, 0, n, parallel)
	}
	s := g.shares.Get().(*gemmShare)
	defer g.shares.Put(s)
	defer func() { s.gemmProduct = gemmProduct{} }()
	s.gemmProduct = gemmProduct{g: g, m: m, n: n, k: k, ldc: ldc, alpha: alpha, a: a, b: b, c: c, set: set, ep: ep}
	if cb := g.chunkBlocks(n, k, workers); cb > 0 {
		s.cb = cb
		s.startChunks()
		parallelTasks(workers, workers, m*n*k >= gemmWake, s.chunkTask)
		return
	}
	panels := (m + g.mr - 1) / g.mr
	fit := max(1, gemmShareB/(min(k, g.kc)*g.nr)) // B's panels that stay in a task's L2
	nPanels := (min(n, g.nc) + g.nr - 1) / g.nr
	rb, cb := gemmGrid(panels, nPanels, fit, float64(g.nr)/float64(g.mr), workers)
	nc := g.nc
	if rb*cb > 1 && (nPanels+cb-1)/cb > fit {
		// Narrower blocks of B, each task's share of one in its L2: A is packed
		// once per block, which costs less than re-reading B from L3.
		nc = cb * fit * g.nr
	}
	s.nc, s.rb, s.cb, s.taper = nc, rb, cb, rb*cb >= 2*workers
	parallelTasks(rb*cb, workers, m*n*k >= gemmWake, s.task)
}

// gemmShare is what run's tasks share for one product, from g.shares: the product,
// written by run before the tasks start, and the functions parallelTasks takes, made
// once per gemmShare (a method value made per product is allocated).
type gemmShare struct {
	gemmProduct
	task      func(t int)    // work
	chunkTask func(t int)    // chunks
	next      []atomic.Int64 // chunks: the next chunk of each column block, cb of them
}

func newGemmShare() *gemmShare {
	s := new(gemmShare)
	s.task = s.work
	s.chunkTask = s.chunks
	return s
}

// gemmProduct is one product of run: the operands and how it is cut.
type gemmProduct struct {
	g            *gemmKernel
	m, n, k, ldc int
	alpha        float32
	a, b         matView
	c            []float32
	set          bool
	nc           int  // the grid: width of the blocks of B, at most g.nc
	rb, cb       int  // the grid's rows and columns of tasks; chunks: cb column blocks
	taper        bool // the grid's row blocks taper (gemmRowSplit): two tasks or more a worker
	ep           gemmEpilogue
}

// work runs task t of the grid over every kc slice of every nc-wide block, in order:
// task t is row t/cb of the grid (A's panels [p0, p1)) and column t%cb (its share of
// each block's B panels).
func (s *gemmShare) work(t int) {
	g := s.g
	i, j := t/s.cb, t%s.cb
	panels := (s.m + g.mr - 1) / g.mr
	p0, p1 := gemmRowSplit(panels, i, s.rb, s.taper), gemmRowSplit(panels, i+1, s.rb, s.taper)
	per := g.mc / g.mr // A's panels in a chunk
	ap := g.aBufs.get()
	defer g.aBufs.put(ap)
	aPack := *ap
	bp := g.columns.get()
	defer g.columns.put(bp)
	if need := ((min(s.nc, s.n)+g.nr-1)/g.nr + s.cb - 1) / s.cb * g.kc * g.nr; cap(*bp) < need {
		*bp = make([]float32, need)
	}
	bPack := (*bp)[:cap(*bp)]
	for jc := 0; jc < s.n; jc += s.nc {
		nc := min(s.nc, s.n-jc)
		nPanels := (nc + g.nr - 1) / g.nr
		q0, q1 := nPanels*j/s.cb, nPanels*(j+1)/s.cb
		if q0 == q1 {
			continue
		}
		for pc := 0; pc < s.k; pc += g.kc {
			kc := min(g.kc, s.k-pc)
			g.packB(bPack, s.b, pc, kc, jc+q0*g.nr, min(q1*g.nr, nc)-q0*g.nr)
			for s0 := p0; s0 < p1; s0 += per {
				s1 := min(s0+per, p1)
				ic := s0 * g.mr
				mc := min(s1*g.mr, s.m) - ic
				g.packA(aPack, s.a, pc, kc, ic, mc)
				g.tiles(kc, aPack, s1-s0, mc, bPack, 0, q1-q0, min(q1*g.nr, nc)-q0*g.nr, s.c, ic*s.ldc+jc+q0*g.nr, s.ldc, s.alpha, s.set && pc == 0)
				if pc+kc == s.k {
					s.ep.apply(s.c, s.ldc, ic, ic+mc, jc+q0*g.nr, jc+min(q1*g.nr, nc))
				}
			}
		}
	}
}

// gemmTaper is how much more than the mean the first row block of a product's grid
// holds, and the last less, the sizes in between falling linearly (gemmRowSplit). The
// workers claim the tasks in order, row block after row block, so the tasks claimed
// last, whose ends make the product's, are the smallest. On the 16-core host equal
// tasks of a 1024³ product took 0.6 to 1.2 ms in one product and a fifth of the cores'
// time was idle at its end, waiting for the slowest; tapering by 0.4 trained the deep
// cases 0-4 % faster at 16 threads over seven alternating rounds (deep-sgd-ckpt4 faster
// in every round), 0.25 as much, 0.6 less (docs/benchmarks.md, "Sixteenth session on the
// 16-core host").
const gemmTaper = 0.4

// gemmRowSplit is where row block i of rb starts among A's panels: blocks tapering by
// gemmTaper with taper, else equal, and equal too where the product has fewer than two
// panels a block (a tapered block must not round to none). A product tapers only where
// its workers have two tasks each or more: with one each, every task starts at once and
// the largest would set the product's end.
func gemmRowSplit(panels, i, rb int, taper bool) int {
	if !taper || rb < 2 || panels < 2*rb {
		return panels * i / rb
	}
	mid := float64(rb-1) / 2
	at := 0.0 // the weights of blocks [0, i); they sum to rb over all blocks
	for b := range i {
		at += 1 + gemmTaper*(mid-float64(b))/mid
	}
	return int(float64(panels)*at/float64(rb) + 0.5)
}

// gemmPackA weighs packing one of A's panels (mr floats per k step, read from L3)
// against running it with one of B's (2·mr·nr flops), for gemmGrid; a panel of B
// weighs nr/mr times as much.
const gemmPackA = 0.5

// gemmShareB is the most floats of packed B (768 KiB) a task runs each of its mc-row
// blocks of A against per kc slice without re-reading them from L3: with the block of
// A and the block of C under them, more no longer stays in a core's L2 (2 MiB on the
// Xeon it was measured on). Two workers each running half of A's rows against all of
// a 1024-wide B (1.5 MiB a slice) ran the micro-kernel 11 % slower per flop than one
// worker alone, and 6-8 % slower overall at 1024 and 2048 than each running half of
// B's columns against all of A. The tests lower it to narrow B's blocks.
var gemmShareB = 3 << 16

// gemmFarB weighs running a panel of A against a panel of B that comes from L3 (past
// a task's gemmShareB) against one from L2, over the cost of a tile, for gemmGrid.
const gemmFarB = 0.25

// gemmPerWorker is how many of a product's tasks there are for each worker that runs
// them (gemmGrid): with more tasks than workers, the ones that start on time take the
// tasks of one that does not. On the 16-core host one, two and three tasks a worker
// ran the 1024 and deep products within that host's drift of each other (nt, tn, tt
// and deep 640-890 GFLOP/s in one call); two is the one that call measured with the
// other changes of branch cpu16b, and it is no slower at 2 threads on the development
// machine.
const gemmPerWorker = 2

// gemmGrid cuts a kc slice of panels of A by nPanels of B into rb·cb tasks for
// workers, rb rows of A's panels by cb columns of B's: at most workers, or a multiple of
// workers up to gemmPerWorker·workers (a whole number of tasks each), the cut whose
// largest task does the least, counting the panels of A and of B it packs (a B panel
// weighing wide times an A panel) and its tiles past the fit panels of B that stay in
// its L2. One worker takes the whole slice as one task.
func gemmGrid(panels, nPanels, fit int, wide float64, workers int) (rb, cb int) {
	rb, cb = 1, 1
	if workers <= 1 {
		return rb, cb
	}
	best := -1.0
	for t := 1; t <= gemmPerWorker*workers; t++ {
		if t > workers && t%workers != 0 {
			continue
		}
		for c := 1; c <= min(t, nPanels); c++ {
			r := t / c
			if r*c != t || r > panels {
				continue
			}
			rows, cols := (panels+r-1)/r, (nPanels+c-1)/c
			cost := float64(rows*cols) + gemmPackA*(float64(rows)+wide*float64(cols)) + gemmFarB*float64(rows*max(0, cols-fit))
			if best < 0 || cost < best {
				best, rb, cb = cost, r, c
			}
		}
	}
	return rb, cb
}

// runColumns is run for a product with too few rows to give every worker two blocks
// of them (a batch of 64 samples): A is packed once, a group of kc slices at a time,
// and each task owns a range of B's panels, which it packs, and the columns of C under
// them, which it scales by beta and accumulates into, so a group of slices is one
// parallel step. Each element of C still sums its kc slices in order.
func (g *gemmKernel) runColumns(m, n, k int, alpha float32, a, b matView, beta float32, c []float32, ldc, workers int, ep gemmEpilogue) {
	mPanels := (m + g.mr - 1) / g.mr
	block := mPanels * g.mr * g.kc // floats of A packed per kc slice
	group := max(1, gemmGroup/block)
	ap := g.groups.get()
	defer g.groups.put(ap)
	if need := min(group, (k+g.kc-1)/g.kc) * block; cap(*ap) < need {
		*ap = make([]float32, need)
	}
	nPanels := (n + g.nr - 1) / g.nr
	tasks := min(nPanels, 2*workers)
	workers = rounded(tasks, workers)
	s := g.columnShares.Get().(*columnShare)
	defer g.columnShares.Put(s)
	s.columnProduct = columnProduct{g: g, m: m, n: n, k: k, alpha: alpha, a: a, b: b, beta: beta, c: c, ldc: ldc,
		mPanels: mPanels, block: block, nPanels: nPanels, tasks: tasks, aPack: (*ap)[:cap(*ap)],
		set: beta == 0 && g.store != nil, ep: ep} // the first kc slice sets C
	defer func() { s.columnProduct = columnProduct{} }()
	for s.p0 = 0; s.p0 < k; s.p0 += group * g.kc {
		s.slices = min(group, (k-s.p0+g.kc-1)/g.kc)
		parallelFor(s.slices*mPanels, 8, s.pack)
		parallelTasks(tasks, workers, m*n*k >= gemmWake, s.task)
	}
}

// columnShare is what runColumns' pieces share, from g.columnShares: the product and
// the group of kc slices at p0, written by runColumns before each parallel step, and
// packA and columns as the functions parallelFor and parallelTasks take, made once
// per columnShare.
type columnShare struct {
	columnProduct
	pack func(lo, hi int) // packA
	task func(t int)      // columns
}

func newColumnShare() *columnShare {
	s := new(columnShare)
	s.pack, s.task = s.packA, s.columns
	return s
}

// columnProduct is one product of runColumns and the group of slices it is at.
type columnProduct struct {
	g              *gemmKernel
	m, n, k        int
	alpha, beta    float32
	a, b           matView
	c              []float32
	ldc            int
	mPanels, block int // A's panels; floats of A packed per kc slice
	nPanels, tasks int // B's panels, shared among tasks
	aPack          []float32
	set            bool // the first kc slice sets C
	ep             gemmEpilogue
	p0, slices     int // the group: slices kc slices from p0
}

// packA packs A's panels [lo, hi) of the group (panel u is panel u%mPanels of slice
// u/mPanels).
func (s *columnShare) packA(lo, hi int) {
	g := s.g
	for u := lo; u < hi; u++ {
		sl, ip := u/s.mPanels, u%s.mPanels
		pc := s.p0 + sl*g.kc
		kc := min(g.kc, s.k-pc)
		g.packA(s.aPack[sl*s.block+ip*kc*g.mr:], s.a, pc, kc, ip*g.mr, min(g.mr, s.m-ip*g.mr))
	}
}

// columns runs task t of the group: its range of B's panels, which it packs, and the
// columns of C under them, which it scales by beta first.
func (s *columnShare) columns(t int) {
	g := s.g
	j0, j1 := s.nPanels*t/s.tasks, s.nPanels*(t+1)/s.tasks
	if s.p0 == 0 && !s.set {
		scaleC(s.m, s.beta, s.c, s.ldc, j0*g.nr, min(j1*g.nr, s.n), false)
	}
	// Room for the task's panels only (up to nc columns): a buffer of kc·nc floats
	// per worker would multiply the packing's memory by them.
	bp := g.columns.get()
	defer g.columns.put(bp)
	if need := min(j1-j0, g.nc/g.nr) * g.kc * g.nr; cap(*bp) < need {
		*bp = make([]float32, need)
	}
	bPack := (*bp)[:cap(*bp)]
	for jc := j0; jc < j1; jc += g.nc / g.nr {
		jn := min(j1, jc+g.nc/g.nr)
		nc := min(jn*g.nr, s.n) - jc*g.nr
		for sl := range s.slices {
			pc := s.p0 + sl*g.kc
			kc := min(g.kc, s.k-pc)
			g.packB(bPack, s.b, pc, kc, jc*g.nr, nc)
			g.tiles(kc, s.aPack[sl*s.block:], s.mPanels, s.m, bPack, 0, jn-jc, nc, s.c, jc*g.nr, s.ldc, s.alpha, s.set && pc == 0)
			if pc+kc == s.k {
				s.ep.apply(s.c, s.ldc, 0, s.m, jc*g.nr, jc*g.nr+nc)
			}
		}
	}
}

// rounded is the fewest goroutines that run tasks equal tasks in as few rounds as
// workers goroutines do: 8 tasks on 6 goroutines take two rounds, as on 4.
func rounded(tasks, workers int) int {
	rounds := (tasks + workers - 1) / workers
	return (tasks + rounds - 1) / rounds
}

// gemmGroup is how many floats of packed A runColumns holds at once (4 MiB); the tests
// lower it to cross groups.
var gemmGroup = 1 << 20

// packA packs rows [x0, x0+rows) of A's kc-long slice at pc as consecutive mr-row
// panels: A's steps are its columns, element (p, x) being A(x, p).
func (g *gemmKernel) packA(dst []float32, a matView, pc, kc, x0, rows int) {
	packPanels(dst, a, a.cs, a.rs, pc, kc, x0, rows, g.mr)
}

// packB packs columns [x0, x0+cols) of B's kc-long slice at pc as consecutive nr-
// column panels: B's steps are its rows, element (p, x) being B(p, x).
func (g *gemmKernel) packB(dst []float32, b matView, pc, kc, x0, cols int) {
	packPanels(dst, b, b.rs, b.cs, pc, kc, x0, cols, g.nr)
}

// packRows is how many steps packPanels copies from one panel before it goes on to
// the next, where a step's floats are contiguous (copyRows): each step's run across
// the panels is read in order, so the hardware prefetcher follows it, where a panel
// at a time reads one or two cache lines of each step, a page apart (a 1024-wide
// operand). On one core of the development machine, packing 1024×1024 row-major B in
// the runs of 8 panels a task packs at 16 threads went from 18.4 to 20.7 GB/s, and A
// stored transposed in runs of 19 panels from 12.7 to 15.1 (8 and 4 steps: the same).
const packRows = 16

// packPanels packs ⌈cols/w⌉ consecutive w-wide panels of src (packPanel's element
// (p, x) for x < cols), panel i at dst[i·kc·w:].
func packPanels(dst []float32, src matView, sp, sx, p0, kc, x0, cols, w int) {
	panels := (cols + w - 1) / w
	if src.o.dt == dtype.F32 && sx == 1 && copyRows != nil && w <= 32 && kc > 0 && panels > 1 {
		s := src.o.f32s()
		base := src.off + p0*sp + x0
		if last := cols - (panels-1)*w; last < w {
			clear(dst[(panels-1)*kc*w : panels*kc*w])
		}
		for q := 0; q < kc; q += packRows {
			rows := min(packRows, kc-q)
			for i := range panels {
				n := min(w, cols-i*w)
				copyRows(&dst[i*kc*w+q*w], w, &s[base+q*sp+i*w], sp, rows, 1<<n-1)
			}
		}
		return
	}
	for i := range panels {
		packPanel(dst[i*kc*w:], src, sp, sx, p0, kc, x0+i*w, min(w, cols-i*w), w)
	}
}

// gemmEpilogue is what a product does to each block of C once the block's last kc
// slice is in, while the block is still in the caches: add a bias to every row, then
// take the ReLU: Binary's Add and Unary's Relu, with their vector loops, over each row
// of the block, so the bits are those of the product followed by the two ops over the
// whole of C, which would read and write it twice more. The zero value does nothing.
type gemmEpilogue struct {
	bias []float32 // bias[j] is added to column j; nil for none
	relu bool
}

// apply runs the epilogue on rows [r0, r1) and columns [c0, c1) of c.
func (e gemmEpilogue) apply(c []float32, ldc, r0, r1, c0, c1 int) {
	if e.bias == nil && !e.relu {
		return
	}
	for i := r0; i < r1; i++ {
		row := c[i*ldc+c0 : i*ldc+c1]
		if e.bias != nil {
			b := e.bias[c0:c1]
			for j := binaryVector(kernels.Add, row, row, b); j < len(row); j++ {
				row[j] += b[j]
			}
		}
		if e.relu {
			for j := reluVector(row, row); j < len(row); j++ {
				row[j] = max(row[j], 0)
			}
		}
	}
}

// from is the epilogue of the block of C that starts at column j0.
func (e gemmEpilogue) from(j0 int) gemmEpilogue {
	if e.bias != nil {
		e.bias = e.bias[j0:]
	}
	return e
}

// tiles adds alpha·A·B into the rows×cols block of C at cOff (sets it to that, with
// set) for mPanels packed panels of A (rows in all) and B's packed panels [j0, j1)
// (cols in all, counted from j0): panel after panel of B, each against every panel
// of A.
func (g *gemmKernel) tiles(kc int, aPack []float32, mPanels, rows int, bPack []float32, j0, j1, cols int, c []float32, cOff, ldc int, alpha float32, set bool) {
	for jp := j0; jp < j1; jp++ {
		w := min(g.nr, cols-(jp-j0)*g.nr)
		for ip := range mPanels {
			h := min(g.mr, rows-ip*g.mr)
			g.tile(kc, &aPack[ip*kc*g.mr], &bPack[jp*kc*g.nr], c, cOff+ip*g.mr*ldc+(jp-j0)*g.nr, ldc, h, w, alpha, set)
		}
	}
}

// tile adds alpha·Ap·Bp into the rows×cols tile of C at cOff (sets the tile to it,
// with set, through the store kernel), through a scratch tile when it is smaller than
// the micro-kernel's.
func (g *gemmKernel) tile(kc int, ap, bp *float32, c []float32, cOff, ldc, rows, cols int, alpha float32, set bool) {
	micro := g.micro
	if set {
		micro = g.store
	}
	if rows == g.mr && cols == g.nr {
		_ = c[cOff+(rows-1)*ldc+cols-1] // the kernel writes the whole tile
		micro(kc, ap, bp, unsafe.SliceData(c[cOff:]), ldc, alpha)
		return
	}
	tp := g.tileBufs.Get().(*[]float32)
	t := *tp
	if !set {
		clear(t)
	}
	micro(kc, ap, bp, unsafe.SliceData(t), g.nr, alpha)
	for i := range rows {
		row := c[cOff+i*ldc : cOff+i*ldc+cols]
		if set {
			copy(row, t[i*g.nr:])
			continue
		}
		for j := range row {
			row[j] += t[i*g.nr+j]
		}
	}
	g.tileBufs.Put(tp)
}

// transposer is a vector transpose of an n×n block of float32 for the packing: row j
// of dst (ldd floats apart) gets element j of each of the rows ≤ n rows of n floats at
// src (lds floats apart; zeros past rows), in the lanes mask selects (its low bits).
type transposer struct {
	n   int
	run func(dst *float32, ldd int, src *float32, lds int, rows int, mask int)
}

// transposeBlock is the widest of transposers (n 0: none), chosen for the process.
var transposeBlock = func() transposer {
	if len(transposers) == 0 {
		return transposer{}
	}
	return transposers[0]
}()

// packPanel packs a kc×w panel of src into dst as kc steps of w floats: element
// (p, x) of the panel, p < kc and x < cols, is src's element off + (p0+p)·sp +
// (x0+x)·sx, converted to float32; x ≥ cols is zero-padding. A panel of A has its
// steps along A's columns, one of B along B's rows.
func packPanel(dst []float32, src matView, sp, sx, p0, kc, x0, cols, w int) {
	dst = dst[:kc*w]
	if cols < w {
		clear(dst)
	}
	base := src.off + p0*sp + x0*sx
	switch {
	case src.o.dt == dtype.F32 && sx == 1:
		s := src.o.f32s()
		if copyRows != nil && cols <= 32 && kc > 0 {
			// A 128-byte copy through memmove cost more than the move.
			copyRows(&dst[0], w, &s[base], sp, kc, 1<<cols-1)
			return
		}
		for p := range kc {
			copy(dst[p*w:p*w+cols], s[base+p*sp:base+p*sp+cols])
		}
	case src.o.dt == dtype.F32 && sp == 1:
		// Each x is a contiguous run along p. Read a cache line of each in turn:
		// going down all cols runs per p would touch cols lines whose stride may
		// map them onto one cache set. n steps of n runs at a time are one vector
		// transpose where the CPU has one.
		s := src.o.f32s()
		const line = 16
		q := 0
		if t := transposeBlock; t.n > 0 {
			for ; q+t.n <= kc; q += t.n {
				for x0 := 0; x0 < w; x0 += t.n {
					rows, from := min(max(cols-x0, 0), t.n), &s[base+q]
					if rows > 0 {
						from = &s[base+x0*sx+q]
					}
					t.run(&dst[q*w+x0], w, from, sx, rows, 1<<min(t.n, w-x0)-1)
				}
			}
		}
		for ; q < kc; q += line {
			qn := min(line, kc-q)
			for x := range cols {
				run := s[base+x*sx+q : base+x*sx+q+qn]
				for p, v := range run {
					dst[(q+p)*w+x] = v
				}
			}
		}
	case src.o.dt == dtype.F32:
		s := src.o.f32s()
		for p := range kc {
			d := dst[p*w : p*w+cols]
			o := base + p*sp
			for x := range d {
				d[x] = s[o+x*sx]
			}
		}
	case sx <= sp: // converting: read along the smaller stride
		var buf [chunk]float32
		for p := range kc {
			copy(dst[p*w:p*w+cols], load(&src.o, base+p*sp, sx, cols, &buf))
		}
	default:
		var buf [chunk]float32
		for x := range cols {
			for q := 0; q < kc; q += chunk {
				v := load(&src.o, base+x*sx+q*sp, sp, min(chunk, kc-q), &buf)
				for p, f := range v {
					dst[(q+p)*w+x] = f
				}
			}
		}
	}
}

// gemmChunkWorkers is the fewest workers from which run schedules a product by
// chunks of A's rows (chunks) rather than by its grid. On the 16-core host the grid's
// tasks of a 1024³ product took 0.6-1.2 ms each at 16 threads and the cores idled
// 10-20 % of the product waiting for the last, each task packing its own share of B;
// by chunks the deep training case ran 4-5 % faster at 16 threads (in two calls of
// three), 5-7 % at 8 and 12-22 % at 4 (docs/benchmarks.md, "Eighteenth session on the
// 16-core host"). At 2 threads
// chunks were 3-7 % slower on the development machine (A packed twice as often). The
// tests lower it.
var gemmChunkWorkers = 4

// gemmChunkB is the most floats of packed B (1 MiB) a chunks worker keeps: its column
// block's panels for every kc slice. The tests lower it.
var gemmChunkB = 1 << 18

// gemmChunkColumns is the fewest columns of C a column block of chunks holds: a chunk
// of A is packed again for every block, and against a block of 64 columns (k = 4096
// with the AVX-512 kernel: two panels) its packing takes by estimate a quarter to a
// half as long as its products (112×384 elements moved for 2.75M multiply-adds a kc
// slice). With every product by chunks the wide case, which has such products, ran 3 %
// slower at 8 threads and the deep case (blocks of 128 to 256 columns) 7 % faster; with
// this floor the wide case ran 0.95x at 8 threads (rounds overlapping), 1.06x at 16 and
// 1.23x at 4. The tests lower it.
var gemmChunkColumns = 128

// chunkBlocks is how many column blocks chunks cuts a product of C's n columns and k
// into: blocks of B's panels whose packing for every kc slice fits gemmChunkB, at
// least one for every two workers. 0 where run's grid is to take the product: fewer
// than gemmChunkWorkers workers, or a block that fits gemmChunkB narrower than
// gemmChunkColumns (k too large). A product of few columns may still get narrower
// blocks, one for every two workers (n = 256 at 8 workers: 64 columns each); its
// chunks then pack A again for each, as measured in the tiny case's weight gradients
// at 16 threads (no loss).
func (g *gemmKernel) chunkBlocks(n, k, workers int) int {
	w := gemmChunkB / (k * g.nr) // B's panels a block may hold
	if workers < gemmChunkWorkers || w*g.nr < gemmChunkColumns {
		return 0
	}
	nPanels := (n + g.nr - 1) / g.nr
	return max((nPanels+w-1)/w, min(nPanels, (workers+1)/2))
}

// startChunks sets each of the cb column blocks' next chunk to the first.
func (s *gemmShare) startChunks() {
	if cap(s.next) < s.cb {
		s.next = make([]atomic.Int64, s.cb)
	}
	s.next = s.next[:s.cb]
	for i := range s.next {
		s.next[i].Store(0)
	}
}

// chunks is worker t's share of a product scheduled by chunks of A's rows: C is cut
// into s.cb column blocks (chunkBlocks) and each block into chunks of g.mc rows. The
// worker starts on block t % cb and takes that block's chunks from its counter one
// after the other, keeping the block's packed B (every kc slice) from chunk to chunk;
// when the block has none left it moves on to the next block that has, packing that
// block's B. So B is packed about once for every two workers, not once for each of the
// grid's rows of tasks, and the unit of balance is a chunk (about 0.2 ms of a 1024³
// product at 16 threads) rather than a task. A chunk runs every kc slice of its block
// of C in order, so every element of C sums its slices in order, as the grid's tasks
// do, and gets the same bits.
func (s *gemmShare) chunks(t int) {
	g := s.g
	nPanels := (s.n + g.nr - 1) / g.nr
	panels := (s.m + g.mr - 1) / g.mr
	per := g.mc / g.mr // A's panels in a chunk
	chunks := (panels + per - 1) / per
	ap := g.aBufs.get()
	defer g.aBufs.put(ap)
	aPack := *ap
	bp := g.columns.get()
	defer g.columns.put(bp)
	if need := s.k * ((nPanels + s.cb - 1) / s.cb) * g.nr; cap(*bp) < need {
		*bp = make([]float32, need)
	}
	bPack := (*bp)[:cap(*bp)]
	col, packed := t%s.cb, -1
	for tries := 0; tries < s.cb; {
		ch := int(s.next[col].Add(1) - 1)
		if ch >= chunks {
			col = (col + 1) % s.cb
			tries++
			continue
		}
		tries = 0
		j0, j1 := nPanels*col/s.cb, nPanels*(col+1)/s.cb
		jc := j0 * g.nr
		cols := min(j1*g.nr, s.n) - jc
		if packed != col {
			for pc := 0; pc < s.k; pc += g.kc {
				g.packB(bPack[pc*(j1-j0)*g.nr:], s.b, pc, min(g.kc, s.k-pc), jc, cols)
			}
			packed = col
		}
		s0 := ch * per
		s1 := min(s0+per, panels)
		ic := s0 * g.mr
		mc := min(s1*g.mr, s.m) - ic
		for pc := 0; pc < s.k; pc += g.kc {
			kc := min(g.kc, s.k-pc)
			g.packA(aPack, s.a, pc, kc, ic, mc)
			g.tiles(kc, aPack, s1-s0, mc, bPack[pc*(j1-j0)*g.nr:], 0, j1-j0, cols, s.c, ic*s.ldc+jc, s.ldc, s.alpha, s.set && pc == 0)
		}
		s.ep.apply(s.c, s.ldc, ic, ic+mc, jc, jc+cols)
	}
}
