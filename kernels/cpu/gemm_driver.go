package cpu

import (
	"runtime"
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

// gemmMinRows is the fewest rows of C a parallel task gets before B's panels are
// split among tasks instead.
const gemmMinRows = 48

// run computes C = alpha·A·B + beta·C for an m×k A, a k×n B and a row-major float32 C
// (ldc floats per row), blocked for the micro-kernel and, when parallel, spread over
// GOMAXPROCS goroutines by blocks of C. Every element of C sums its products in k
// order, one kc slice after the other, however the blocks are spread.
func (g *gemmKernel) run(m, n, k int, alpha float32, a, b matView, beta float32, c []float32, ldc int, parallel bool) {
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
					// B's steps are its rows: element (p, x) is B(p, x).
					packPanel(bPack[jp*kc*g.nr:], b, b.rs, b.cs, pc, kc, jc+jp*g.nr, min(g.nr, nc-jp*g.nr), g.nr)
				}
			}
			if workers > 1 {
				parallelFor(nPanels, 4, packPanels)
			} else {
				packPanels(0, nPanels)
			}
			// Tasks are (block of rows, range of B panels). Rows come in even blocks
			// of whole panels, at most mc and, when there are several workers, small
			// enough to give each two blocks but not under gemmMinRows: each task
			// packs its rows of A once. Only when that still leaves too few tasks are
			// the B panels cut as well (then A is packed once per range).
			blocks := (m + g.mc - 1) / g.mc
			if workers > 1 {
				blocks = max(blocks, min(2*workers, m/gemmMinRows))
			}
			mcEven := ((m+blocks-1)/blocks + g.mr - 1) / g.mr * g.mr
			mBlocks := (m + mcEven - 1) / mcEven
			split := 1
			if workers > 1 {
				split = min(nPanels, max(1, (2*workers+mBlocks-1)/mBlocks))
			}
			task := func(t int) {
				ic := (t / split) * mcEven
				mc := min(mcEven, m-ic)
				j0, j1 := nPanels*(t%split)/split, nPanels*(t%split+1)/split
				ap := g.packA.Get().(*[]float32)
				aPack := *ap
				mPanels := (mc + g.mr - 1) / g.mr
				for ip := range mPanels {
					// A's steps are its columns: element (p, x) is A(x, p).
					packPanel(aPack[ip*kc*g.mr:], a, a.cs, a.rs, pc, kc, ic+ip*g.mr, min(g.mr, mc-ip*g.mr), g.mr)
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
		for p := range kc {
			copy(dst[p*w:p*w+cols], s[base+p*sp:base+p*sp+cols])
		}
	case src.o.dt == dtype.F32 && sp == 1:
		// Each x is a contiguous run along p. Read a cache line of each in turn:
		// going down all cols runs per p would touch cols lines whose stride may
		// map them onto one cache set. 16 steps of 16 runs at a time are one vector
		// transpose where the CPU has one.
		s := src.o.f32s()
		const line = 16
		q := 0
		if transpose16 != nil {
			for ; q+line <= kc; q += line {
				for x0 := 0; x0 < w; x0 += line {
					rows, from := min(max(cols-x0, 0), line), &s[base+q]
					if rows > 0 {
						from = &s[base+x0*sx+q]
					}
					transpose16(&dst[q*w+x0], w, from, sx, rows, 1<<min(line, w-x0)-1)
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
