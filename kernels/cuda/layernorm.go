package cuda

import (
	"github.com/subletml/sublet/device"
	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/kernels"
)

// lnPiece is the rows one thread sums per column of dw and db before partials are
// combined.
const lnPiece = 1024

func (b *Backend) LayerNorm(y, mean, rstd, x, w, bias kernels.Operand, rows, n int, eps float64) {
	const op = "layer_norm"
	checkAxis(op, rows, n, 1)
	py, px := rowsOf(op, "y", y, f32, rows*n), rowsOf(op, "x", x, f32, rows*n)
	pm, pr := rowsOf(op, "mean", mean, f32, rows), rowsOf(op, "rstd", rstd, f32, rows)
	pw, pb := rowsOf(op, "weight", w, f32, n), rowsOf(op, "bias", bias, f32, n)
	if rows == 0 {
		return
	}
	k, g := kLayerNormWarp, 32
	if n > warpRow {
		k, g = kLayerNormBlock, block
	}
	b.launch(k, rowsGrid(int64(rows), g, y.Mem.Stream), cudadev.ArgUint64(py), cudadev.ArgUint64(pm), cudadev.ArgUint64(pr),
		cudadev.ArgUint64(px), cudadev.ArgUint64(pw), cudadev.ArgUint64(pb),
		cudadev.ArgInt64(int64(rows)), cudadev.ArgInt64(int64(n)), cudadev.ArgFloat32(float32(eps)))
}

// LayerNormBackward computes dw and db (column sums) before dx, so dx may be g.
func (b *Backend) LayerNormBackward(dx, dw, db, g, x, mean, rstd, w kernels.Operand, rows, n int) {
	const op = "layer_norm backward"
	checkAxis(op, rows, n, 1)
	pg, px := rowsOf(op, "g", g, f32, rows*n), rowsOf(op, "x", x, f32, rows*n)
	pm, pr := rowsOf(op, "mean", mean, f32, rows), rowsOf(op, "rstd", rstd, f32, rows)
	pw := rowsOf(op, "weight", w, f32, n)
	pdw, pdb := rowsOf(op, "dw", dw, f32, n), rowsOf(op, "db", db, f32, n)
	pdx := rowsOf(op, "dx", dx, f32, rows*n)
	s := g.Mem.Stream
	if (pdw != 0 || pdb != 0) && n > 0 {
		b.layerNormDwdb(pdw, pdb, pg, px, pm, pr, int64(rows), int64(n), s)
	}
	if pdx == 0 || rows == 0 {
		return
	}
	k, gs := kLayerNormDxWarp, 32
	if n > warpRow {
		k, gs = kLayerNormDxBlock, block
	}
	b.launch(k, rowsGrid(int64(rows), gs, s), cudadev.ArgUint64(pdx), cudadev.ArgUint64(pg), cudadev.ArgUint64(px),
		cudadev.ArgUint64(pm), cudadev.ArgUint64(pr), cudadev.ArgUint64(pw), cudadev.ArgInt64(int64(rows)), cudadev.ArgInt64(int64(n)))
}

func (b *Backend) layerNormDwdb(pdw, pdb, pg, px, pm, pr uint64, rows, n int64, s device.Stream) {
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
	b.launch(kLayerNormDwdb, b.grid(n*pieces, s), args[:]...)
	if pieces > 1 {
		b.launch(kLayerNormDwdbFinish, b.grid(n, s), cudadev.ArgUint64(pdw), cudadev.ArgUint64(pdb),
			cudadev.ArgInt64(n), cudadev.ArgInt64(pieces), cudadev.ArgUint64(part))
	}
}
