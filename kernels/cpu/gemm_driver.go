package cpu

import (
	"sync/atomic"
	"unsafe"

	"github.com/subletml/sublet/dtype"
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
// the goroutines gemmWorkers gives it, by blocks of C. Every element of C sums its products in k
// order, one kc slice after the other, however the blocks are spread.
//
// C's tiles are cut into a grid of tasks, one per worker for the whole product
// (gemmGrid): rows of A's panels by columns of B's. Each task runs its rows of A (in
// mc-row chunks that stay in its L2) against its columns of B, one kc slice after the
// other. B's panels are packed once per slice, shared (the packed block, kc·nc floats,
// lives in the shared L3): the tasks of a column of the grid each pack a part of that
// column's panels, and each runs its own part first and the others' as they are
// published (gemmShare). Two packed blocks alternate, so a task packs slice s+1 while
// the others still run slice s: no task waits for the whole grid, only for the parts
// of its column, and a slow part delays the others by what it lags, not by a barrier
// per slice. With gemmShareA columns or more, A's chunks are packed once too, shared by
// the tasks of a row of the grid: each panel of a chunk is packed by whichever of them
// claims it first (gemmRow), so a task that comes late finds its chunk packed; two
// chunk buffers alternate per row. Where a task's share of an nc-wide block of B would
// not stay in its L2 (gemmShareB), the blocks are narrowed until it does. From
// gemmPrivate tasks on, nothing is shared: each task packs its own rows of A and its
// own columns of B, and no task waits for another.
func (g *gemmKernel) run(m, n, k int, alpha float32, a, b matView, beta float32, c []float32, ldc int, parallel bool) {
	if m == 0 || n == 0 {
		return
	}
	workers := 1
	if parallel {
		workers = gemmWorkers(m * n * k)
	}
	if k == 0 || alpha == 0 {
		scaleC(m, beta, c, ldc, 0, n, parallel)
		return
	}
	if workers > 1 && m < gemmMinRows {
		g.runColumns(m, n, k, alpha, a, b, beta, c, ldc, workers)
		return
	}
	set := beta == 0 && g.store != nil // the first kc slice sets C
	if !set {
		scaleC(m, beta, c, ldc, 0, n, parallel)
	}
	panels := (m + g.mr - 1) / g.mr
	fit := max(1, gemmShareB/(min(k, g.kc)*g.nr)) // B's panels that stay in a task's L2
	nPanels := (min(n, g.nc) + g.nr - 1) / g.nr
	rb, cb := gemmGrid(panels, nPanels, fit, workers)
	nc := g.nc
	if rb*cb > 1 && (nPanels+cb-1)/cb > fit {
		// Narrower blocks of B, each task's share of one in its L2: A is packed
		// once per block, which costs less than re-reading B from L3.
		nc = cb * fit * g.nr
	}
	s := g.shares.Get().(*gemmShare)
	defer g.shares.Put(s)
	s.start(g, m, n, k, alpha, a, b, c, ldc, set, nc, rb, cb, rb*cb >= gemmPrivate)
	defer s.finish()
	concurrently(rb*cb, s.work)
}

// gemmShare is the state that run's tasks share for one product: the operands, the
// grid, B's two packed blocks and each task's progress. Only run writes the fields
// above the counters, before the tasks start.
type gemmShare struct {
	g                *gemmKernel
	m, n, k, ldc     int
	alpha            float32
	a, b             matView
	c                []float32
	set              bool
	nc               int // width of the blocks of B, at most g.nc
	rb, cb           int
	private          bool          // each task packs its own B (from g.columns) and A: no bufs, one task a row
	bufs             [2]*[]float32 // from g.bBufs; kc slice s packs into bufs[s%blocks]
	blocks           int           // 0 when private, 1 with a single task (nothing runs ahead), else 2
	packed, finished []gemmCounter // per task: slices whose part of B it has packed; slices it has run
	sharers          int           // tasks that share a row's packing of A: cb from gemmShareA on, else 1
	rows             []gemmRow     // per sharers tasks (a row of the grid, or a task): their packed chunks of A
	aBlocks          int           // chunk buffers per row: 1 with a task per row, else 2
	ran              []gemmCounter // per task: chunks of A it has run (its row's count)
	progress                       // tasks sleep here for the others' counters
}

// gemmRow is the packing of A that sharers tasks share: a row of the grid, or one
// task. Its chunks (a kc slice of up to mc rows of A, in the order every task of the
// row runs them) are numbered from 0, and so are their panels, over the whole product:
// chunk u packs into bufs[u%aBlocks]. A panel is packed by the task that claims it
// (claimed moves past it), which then counts it in packed; a chunk is ready once
// packed reaches its last panel, since no task claims a panel of the next chunk before
// the whole chunk is ready.
type gemmRow struct {
	bufs            [2]*[]float32 // from g.aBufs
	claimed, packed gemmCounter
}

// gemmCounter is a task's progress, alone on its cache line so that a task publishing
// slices does not slow the ones reading the others'.
type gemmCounter struct {
	atomic.Int64
	_ [56]byte
}

func (s *gemmShare) start(g *gemmKernel, m, n, k int, alpha float32, a, b matView, c []float32, ldc int, set bool, nc, rb, cb int, private bool) {
	s.g, s.m, s.n, s.k, s.alpha, s.a, s.b, s.c, s.ldc, s.set, s.nc, s.rb, s.cb, s.private = g, m, n, k, alpha, a, b, c, ldc, set, nc, rb, cb, private
	tasks := rb * cb
	if cap(s.packed) < tasks {
		s.packed, s.finished = make([]gemmCounter, tasks), make([]gemmCounter, tasks)
	}
	s.packed, s.finished = s.packed[:tasks], s.finished[:tasks]
	for t := range tasks {
		s.packed[t].Store(0)
		s.finished[t].Store(0)
	}
	s.blocks = min(tasks, len(s.bufs))
	if private {
		s.blocks = 0
	}
	for i := range s.blocks {
		s.bufs[i] = g.bBufs.Get().(*[]float32)
	}
	if cap(s.ran) < tasks {
		s.ran = make([]gemmCounter, tasks)
	}
	s.ran = s.ran[:tasks]
	for t := range tasks {
		s.ran[t].Store(0)
	}
	s.sharers = 1
	if cb >= gemmShareA && !private {
		s.sharers = cb
	}
	if cap(s.rows) < tasks/s.sharers {
		s.rows = make([]gemmRow, tasks/s.sharers)
	}
	s.rows = s.rows[:tasks/s.sharers]
	s.aBlocks = min(s.sharers, len(s.rows[0].bufs))
	for i := range s.rows {
		r := &s.rows[i]
		r.claimed.Store(0)
		r.packed.Store(0)
		for b := range s.aBlocks {
			r.bufs[b] = g.aBufs.Get().(*[]float32)
		}
	}
}

// finish returns the packed blocks and drops the references to the operands.
func (s *gemmShare) finish() {
	for i := range s.blocks {
		s.g.bBufs.Put(s.bufs[i])
		s.bufs[i] = nil
	}
	for i := range s.rows {
		for b := range s.aBlocks {
			s.g.aBufs.Put(s.rows[i].bufs[b])
			s.rows[i].bufs[b] = nil
		}
	}
	s.a, s.b, s.c = matView{}, matView{}, nil
}

// work runs task t of the grid over every kc slice of every nc-wide block, in order:
// task t is row t/cb of the grid (A's panels [p0, p1)) and column t%cb (its share of
// each block's B panels, of which it packs part t/cb, or all when private).
func (s *gemmShare) work(t int) {
	g := s.g
	i, j := t/s.cb, t%s.cb
	panels := (s.m + g.mr - 1) / g.mr
	p0, p1 := panels*i/s.rb, panels*(i+1)/s.rb
	per := g.mc / g.mr             // A's panels in a chunk
	slice, chunk, first := 0, 0, 0 // first: the row's panels of the chunks before this one
	var laid [2][2]int             // per block of B: the kc and panels of the slice last packed into it
	var own []float32              // private: the task's packed share of B
	if s.private {
		bp := s.g.columns.Get().(*[]float32)
		defer s.g.columns.Put(bp)
		if need := ((min(s.nc, s.n)+g.nr-1)/g.nr + s.cb - 1) / s.cb * g.kc * g.nr; cap(*bp) < need {
			*bp = make([]float32, need)
		}
		own = (*bp)[:cap(*bp)]
	}
	for jc := 0; jc < s.n; jc += s.nc {
		nc := min(s.nc, s.n-jc)
		nPanels := (nc + g.nr - 1) / g.nr
		q0, q1 := nPanels*j/s.cb, nPanels*(j+1)/s.cb
		for pc := 0; pc < s.k; pc += g.kc {
			kc := min(g.kc, s.k-pc)
			parts, base := s.rb, 0 // the parts of the share it runs, and the panel at bPack[0]
			bPack := own
			if s.private {
				parts, base = 1, q0
				for jp := q0; jp < q1; jp++ {
					g.packB(own[(jp-q0)*kc*g.nr:], s.b, pc, kc, jc+jp*g.nr, min(g.nr, nc-jp*g.nr))
				}
			} else {
				bPack = s.packShared(t, slice, kc, pc, jc, nc, nPanels, q0, q1, &laid)
			}
			for s0 := p0; s0 < p1; s0 += per {
				s1 := min(s0+per, p1)
				ic := s0 * g.mr
				mc := min(s1*g.mr, s.m) - ic
				aPack := s.chunk(t/s.sharers, chunk, first, s0, s1, pc, kc)
				for v := range parts { // its own part first, then the others' as they come
					u := (i + v) % s.rb
					lo, hi := q0, q1
					if !s.private {
						if s0 == p0 {
							s.await(&s.packed[u*s.cb+j].Int64, int64(slice+1))
						}
						lo, hi = gemmPart(q0, q1, u, s.rb)
					}
					if lo < hi {
						g.tiles(kc, aPack, s1-s0, mc, bPack, lo-base, hi-base, min(hi*g.nr, nc)-lo*g.nr, s.c, ic*s.ldc+jc+lo*g.nr, s.ldc, s.alpha, s.set && pc == 0)
					}
				}
				chunk, first = chunk+1, first+s1-s0
				s.ran[t].Store(int64(chunk))
				s.moved()
			}
			s.finished[t].Store(int64(slice + 1))
			s.moved()
			slice++
		}
	}
}

// packShared packs task t's part of its column's B panels [q0, q1) of kc slice number
// slice (at pc, of the nc-wide block at jc) into the shared block the slice uses, once
// the tasks that read the block before are done with it, publishes it, and returns
// the block.
func (s *gemmShare) packShared(t, slice, kc, pc, jc, nc, nPanels, q0, q1 int, laid *[2][2]int) []float32 {
	g := s.g
	i, j := t/s.cb, t%s.cb
	blk := slice % s.blocks
	bPack := *s.bufs[blk]
	// The block held slice-blocks: the tasks that read it must be done with
	// it. Those are the column's where that slice laid the block out as this
	// one does; a shorter kc or a narrower nc block moves every column's
	// panels, onto the ones other columns read.
	if layout := [2]int{kc, nPanels}; layout == laid[blk] {
		for u := range s.rb {
			s.await(&s.finished[u*s.cb+j].Int64, int64(slice-s.blocks+1))
		}
	} else {
		for u := range s.rb * s.cb {
			s.await(&s.finished[u].Int64, int64(slice-s.blocks+1))
		}
		laid[blk] = layout
	}
	lo, hi := gemmPart(q0, q1, i, s.rb)
	for jp := lo; jp < hi; jp++ {
		g.packB(bPack[jp*kc*g.nr:], s.b, pc, kc, jc+jp*g.nr, min(g.nr, nc-jp*g.nr))
	}
	s.packed[t].Store(int64(slice + 1))
	s.moved()
	return bPack
}

// chunk returns chunk u of row i (of s.rows) packed, A's panels [s0, s1) of the kc
// slice at pc, whose first panel is the row's panel first counted over its chunks:
// the calling task packs the panels no other task of the row has claimed, then waits
// for the others' to be packed.
func (s *gemmShare) chunk(i, u, first, s0, s1, pc, kc int) []float32 {
	g, r := s.g, &s.rows[i]
	// The buffer held chunk u-aBlocks: the row's tasks must be done with it.
	for v := range s.sharers {
		s.await(&s.ran[i*s.sharers+v].Int64, int64(u-s.aBlocks+1))
	}
	buf := *r.bufs[u%s.aBlocks]
	last := int64(first + s1 - s0)
	for x := r.claimed.Load(); x < last; x = r.claimed.Load() {
		if !r.claimed.CompareAndSwap(x, x+1) {
			continue
		}
		ip := int(x) - first
		row := (s0 + ip) * g.mr
		g.packA(buf[ip*kc*g.mr:], s.a, pc, kc, row, min(g.mr, s.m-row))
		if r.packed.Add(1) == last {
			s.moved()
		}
	}
	s.await(&r.packed.Int64, last)
	return buf
}

// gemmShareA is the fewest columns of the grid from which the tasks of a row share
// its packing of A (below it each task packs its own chunks): sharing saves a task
// (cb-1)/cb of A's packing, at the price of reading those panels from the others'
// caches and waiting for them chunk by chunk. On the 2-core dev machine a 1×2 grid
// (1024³ at 2 threads) ran nn about 4 % slower shared than not; at GOMAXPROCS 16 a
// 4×4 grid used 6 % less CPU time shared.
const gemmShareA = 3

// gemmPrivate is the fewest tasks of a grid from which each packs its own A and B
// (run): sharing the packing costs each task a quarter of it at 16 tasks, but couples
// it to the tasks of its row (A's chunks) and of its column (B's parts).
var gemmPrivate = 16

// gemmPart is part u of parts of the panels [q0, q1).
func gemmPart(q0, q1, u, parts int) (lo, hi int) {
	return q0 + (q1-q0)*u/parts, q0 + (q1-q0)*(u+1)/parts
}

// gemmPackA weighs bringing one of A's panels into a task's L2 (packing it, or reading
// the copy a task of its row packed) against running it with one of B's (the moves of
// mr floats per k step against 2·mr·nr flops), for gemmGrid.
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

// gemmGrid cuts a kc slice of panels of A by nPanels of B into rb·cb ≤ workers tasks,
// rb rows of A's panels by cb columns of B's: the cut whose largest task does the
// least, counting the A panels each task brings in (every column of tasks packs its
// rows again, or reads them from L3 where another task of its row packed them) and its
// tiles past the fit panels of B that stay in its L2. One worker takes the whole slice.
func gemmGrid(panels, nPanels, fit, workers int) (rb, cb int) {
	rb, cb = 1, 1
	best := -1.0
	for t := 1; t <= workers; t++ {
		for c := 1; c <= min(t, nPanels); c++ {
			r := t / c
			if r*c != t || r > panels {
				continue
			}
			rows, cols := (panels+r-1)/r, (nPanels+c-1)/c
			cost := float64(rows*cols) + gemmPackA*float64(rows) + gemmFarB*float64(rows*max(0, cols-fit))
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
func (g *gemmKernel) runColumns(m, n, k int, alpha float32, a, b matView, beta float32, c []float32, ldc, workers int) {
	mPanels := (m + g.mr - 1) / g.mr
	block := mPanels * g.mr * g.kc // floats of A packed per kc slice
	group := max(1, gemmGroup/block)
	ap := g.groups.Get().(*[]float32)
	defer g.groups.Put(ap)
	if need := min(group, (k+g.kc-1)/g.kc) * block; cap(*ap) < need {
		*ap = make([]float32, need)
	}
	aPack := (*ap)[:cap(*ap)]
	nPanels := (n + g.nr - 1) / g.nr
	tasks := min(nPanels, 2*workers)
	workers = rounded(tasks, workers)
	set := beta == 0 && g.store != nil // the first kc slice sets C
	for p0 := 0; p0 < k; p0 += group * g.kc {
		slices := min(group, (k-p0+g.kc-1)/g.kc)
		parallelFor(slices*mPanels, 8, func(lo, hi int) {
			for u := lo; u < hi; u++ {
				s, ip := u/mPanels, u%mPanels
				pc := p0 + s*g.kc
				kc := min(g.kc, k-pc)
				g.packA(aPack[s*block+ip*kc*g.mr:], a, pc, kc, ip*g.mr, min(g.mr, m-ip*g.mr))
			}
		})
		parallelTasks(tasks, workers, m*n*k >= gemmWake, func(t int) {
			j0, j1 := nPanels*t/tasks, nPanels*(t+1)/tasks
			if p0 == 0 && !set {
				scaleC(m, beta, c, ldc, j0*g.nr, min(j1*g.nr, n), false)
			}
			// Room for the task's panels only (up to nc columns): a pool buffer of
			// kc·nc floats per worker would multiply the packing's memory by them.
			bp := g.columns.Get().(*[]float32)
			defer g.columns.Put(bp)
			if need := min(j1-j0, g.nc/g.nr) * g.kc * g.nr; cap(*bp) < need {
				*bp = make([]float32, need)
			}
			bPack := (*bp)[:cap(*bp)]
			for jc := j0; jc < j1; jc += g.nc / g.nr {
				jn := min(j1, jc+g.nc/g.nr)
				nc := min(jn*g.nr, n) - jc*g.nr
				for s := range slices {
					pc := p0 + s*g.kc
					kc := min(g.kc, k-pc)
					for jp := jc; jp < jn; jp++ {
						g.packB(bPack[(jp-jc)*kc*g.nr:], b, pc, kc, jp*g.nr, min(g.nr, n-jp*g.nr))
					}
					g.tiles(kc, aPack[s*block:], mPanels, m, bPack, 0, jn-jc, nc, c, jc*g.nr, ldc, alpha, set && pc == 0)
				}
			}
		})
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

// packA packs rows [x0, x0+rows) of A's kc-long slice at pc as one panel: A's steps
// are its columns, element (p, x) being A(x, p).
func (g *gemmKernel) packA(dst []float32, a matView, pc, kc, x0, rows int) {
	packPanel(dst, a, a.cs, a.rs, pc, kc, x0, rows, g.mr)
}

// packB packs columns [x0, x0+cols) of B's kc-long slice at pc as one panel: B's steps
// are its rows, element (p, x) being B(p, x).
func (g *gemmKernel) packB(dst []float32, b matView, pc, kc, x0, cols int) {
	packPanel(dst, b, b.rs, b.cs, pc, kc, x0, cols, g.nr)
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
