package cuda

import (
	"github.com/subletml/sublet/device"
	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// lnPiece is the rows one thread sums per column of dw and db before partials are
// combined.
const lnPiece = 1024

// LayerNorm computes in x's type (F32 or F64), every operand of it, or for F16 and BF16
// x, y, w and b in float32, with float32 mean and rstd; eps is rounded to the compute
// type, as kernels/cpu rounds it.
func (b *Backend) LayerNorm(y, mean, rstd, x, w, bias kernels.Operand, rows, n int, eps float64) {
	const op = "layer_norm"
	checkAxis(op, rows, n, 1)
	st, ct := rowStorage(x), rowType(x)
	py, px := rowsOf(op, "y", y, st, rows*n), rowsOf(op, "x", x, st, rows*n)
	pm, pr := rowsOf(op, "mean", mean, ct, rows), rowsOf(op, "rstd", rstd, ct, rows)
	pw, pb := rowsOf(op, "weight", w, st, n), rowsOf(op, "bias", bias, st, n)
	if rows == 0 {
		return
	}
	f64 := ct == dtype.F64
	k, g := rowKernel(kLayerNormRegsWarp, kLayerNormRegs16Warp, kLayerNormWarp, st, n, py, px, pw, pb)
	b.launch(k, rowsGrid(int64(rows), g, y.Mem.Stream), cudadev.ArgUint64(py), cudadev.ArgUint64(pm), cudadev.ArgUint64(pr),
		cudadev.ArgUint64(px), cudadev.ArgUint64(pw), cudadev.ArgUint64(pb),
		cudadev.ArgInt64(int64(rows)), cudadev.ArgInt64(int64(n)), number(f64, eps))
}

// LayerNormBackward computes as LayerNorm does (g, x, w and dx of x's type; mean, rstd,
// dw and db of the compute type), dw and db (column sums) before dx, so dx may be g.
func (b *Backend) LayerNormBackward(dx, dw, db, g, x, mean, rstd, w kernels.Operand, rows, n int) {
	const op = "layer_norm backward"
	checkAxis(op, rows, n, 1)
	st, ct := rowStorage(x), rowType(x)
	pg, px := rowsOf(op, "g", g, st, rows*n), rowsOf(op, "x", x, st, rows*n)
	pm, pr := rowsOf(op, "mean", mean, ct, rows), rowsOf(op, "rstd", rstd, ct, rows)
	pw := rowsOf(op, "weight", w, st, n)
	pdw, pdb := rowsOf(op, "dw", dw, ct, n), rowsOf(op, "db", db, ct, n)
	pdx := rowsOf(op, "dx", dx, st, rows*n)
	s := g.Mem.Stream
	if (pdw != 0 || pdb != 0) && n > 0 {
		b.layerNormDwdb(st, pdw, pdb, pg, px, pm, pr, int64(rows), int64(n), s)
	}
	if pdx == 0 || rows == 0 {
		return
	}
	k, gs := rowKernel(kLayerNormDxRegsWarp, kLayerNormDxRegs16Warp, kLayerNormDxWarp, st, n, pdx, pg, px, pw)
	b.launch(k, rowsGrid(int64(rows), gs, s), cudadev.ArgUint64(pdx), cudadev.ArgUint64(pg), cudadev.ArgUint64(px),
		cudadev.ArgUint64(pm), cudadev.ArgUint64(pr), cudadev.ArgUint64(pw), cudadev.ArgInt64(int64(rows)), cudadev.ArgInt64(int64(n)))
}

// layerNormDwdb writes dw and db (of the compute type) from g and x stored as st.
func (b *Backend) layerNormDwdb(st dtype.DType, pdw, pdb, pg, px, pm, pr uint64, rows, n int64, s device.Stream) {
	// Pieces of rows, their partials (two doubles per column) within the scratch.
	pieces := max(1, min((rows+lnPiece-1)/lnPiece, scratchBytes/(16*n)))
	piece := max(1, (rows+pieces-1)/pieces)
	sc, ok := b.partials(s, pieces)
	if !ok {
		return
	}
	defer sc.unlock()
	part := sc.addr()
	args := [11]cudadev.Arg{cudadev.ArgUint64(pdw), cudadev.ArgUint64(pdb), cudadev.ArgUint64(pg), cudadev.ArgUint64(px),
		cudadev.ArgUint64(pm), cudadev.ArgUint64(pr), cudadev.ArgInt64(rows), cudadev.ArgInt64(n),
		cudadev.ArgInt64(piece), cudadev.ArgInt64(pieces), cudadev.ArgUint64(part)}
	b.launch(kLayerNormDwdb.stored(st), b.grid(n*pieces, s), args[:]...)
	if pieces > 1 {
		b.launch(kLayerNormDwdbFinish.in(st == dtype.F64), b.grid(n, s), cudadev.ArgUint64(pdw), cudadev.ArgUint64(pdb),
			cudadev.ArgInt64(n), cudadev.ArgInt64(pieces), cudadev.ArgUint64(part))
	}
}
