package cpu

import "math"

// LayerNorm normalizes each of the rows of x ([rows, n], row-major) to zero mean and
// unit variance, then scales by w and shifts by b (n floats each; nil for none):
// y = (x - mean)·rstd·w + b with rstd = 1/√(var + eps), var the biased variance, eps
// rounded to T (as PyTorch's float kernel takes it). It saves each row's mean and rstd
// (rows floats each) for LayerNormBackward. y may be x. Moments accumulate in float64.
func LayerNorm[T float](y, mean, rstd, x, w, b []T, rows, n int, eps float64) {
	const op = "layer_norm"
	checkRowStats(op, "y", len(x), len(y), len(mean), len(rstd), rows, n)
	checkAffine(op, w, b, n)
	parallelFor(rows, max(1, grain/max(n, 1)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			mean[i], rstd[i] = layerNormRow(y[i*n:(i+1)*n], x[i*n:(i+1)*n], w, b, eps)
		}
	})
}

// checkRowStats panics unless x and the other row operand (named other: y, or g) hold
// rows·n elements and mean and rstd rows each: the operands layer norm and its
// backward share, whatever type their rows are stored in.
func checkRowStats(op, other string, x, o, mean, rstd, rows, n int) {
	checkLen(op, "x", x, rows*n)
	checkLen(op, other, o, rows*n)
	checkLen(op, "mean", mean, rows)
	checkLen(op, "rstd", rstd, rows)
}

// layerNormRow is LayerNorm of one row into out (which may be row), returning the
// row's mean and rstd.
func layerNormRow[T float](out, row, w, b []T, eps float64) (m, r T) {
	n := len(row)
	var s float64
	for _, v := range row {
		s += float64(v)
	}
	mu := s / float64(n)
	var ss float64
	for _, v := range row {
		d := float64(v) - mu
		ss += d * d
	}
	r = T(1 / math.Sqrt(ss/float64(n)+float64(T(eps))))
	m = T(mu)
	for j, v := range row {
		h := (v - m) * r
		if w != nil {
			h *= w[j]
		}
		if b != nil {
			h += b[j]
		}
		out[j] = h
	}
	return m, r
}

// LayerNormBackward writes the gradients of LayerNorm given the output's gradient g:
// dx (may be nil, or g itself), dw and db (n floats each, written not accumulated; nil
// when not wanted). w is LayerNorm's weight (nil if it had none); mean and rstd are
// what it saved. dw and db sum over rows in row order per column, so they are
// deterministic.
func LayerNormBackward[T float](dx, dw, db, g, x, mean, rstd, w []T, rows, n int) {
	const op = "layer_norm backward"
	checkRowStats(op, "g", len(x), len(g), len(mean), len(rstd), rows, n)
	checkAffine(op, w, nil, n)
	checkAffine(op, dw, db, n)
	// This runs before dx, so dx may overwrite g.
	layerNormDwdb(dw, db, rows, n, func(sw, sb *[chunk]float64, i, j0, cols int) {
		dwdbAdd(sw, sb, g[i*n+j0:i*n+j0+cols], x[i*n+j0:i*n+j0+cols], mean[i], rstd[i])
	})
	if dx == nil {
		return
	}
	checkLen(op, "dx", len(dx), rows*n)
	parallelFor(rows, max(1, grain/max(n, 1)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			layerNormDxRow(dx[i*n:(i+1)*n], g[i*n:(i+1)*n], x[i*n:(i+1)*n], w, mean[i], rstd[i])
		}
	})
}

// layerNormDwdb writes dw and db (either nil: not wanted; both nil: nothing to do),
// column sums over rows rows of n: columns are independent, so each block of at most
// chunk columns [j0, j0+w) sums its rows in order, add(sw, sb, i, j0, w) adding row i.
func layerNormDwdb[T float](dw, db []T, rows, n int, add func(sw, sb *[chunk]float64, i, j0, w int)) {
	if dw == nil && db == nil {
		return
	}
	blocks := (n + chunk - 1) / chunk
	parallelFor(blocks, max(1, grain/max(rows*chunk, 1)), func(lo, hi int) {
		for blk := lo; blk < hi; blk++ {
			j0 := blk * chunk
			width := min(chunk, n-j0)
			var sw, sb [chunk]float64
			for i := range rows {
				add(&sw, &sb, i, j0, width)
			}
			for j := range width {
				if dw != nil {
					dw[j0+j] = T(sw[j])
				}
				if db != nil {
					db[j0+j] = T(sb[j])
				}
			}
		}
	})
}

// dwdbAdd adds one row's terms of dw and db, over a block of at most chunk columns
// (gr and xr), to the sums sw and sb.
func dwdbAdd[T float](sw, sb *[chunk]float64, gr, xr []T, m, r T) {
	for j, gv := range gr {
		sw[j] += float64(gv * (xr[j] - m) * r)
		sb[j] += float64(gv)
	}
}

// layerNormDxRow writes one row of LayerNormBackward's dx (out may be gr):
// dx = rstd·(ĝ - mean(ĝ) - x̂·mean(ĝ·x̂)) with ĝ = g·w, x̂ = (x-mean)·rstd.
func layerNormDxRow[T float](out, gr, xr, w []T, m, r T) {
	n := len(gr)
	var sg, sgx float64
	for j, gv := range gr {
		if w != nil {
			gv *= w[j]
		}
		sg += float64(gv)
		sgx += float64(gv * (xr[j] - m) * r)
	}
	mg, mgx := T(sg/float64(n)), T(sgx/float64(n))
	for j, gv := range gr {
		if w != nil {
			gv *= w[j]
		}
		out[j] = r * (gv - mg - (xr[j]-m)*r*mgx)
	}
}

func checkAffine[T any](op string, w, b []T, n int) {
	if w != nil {
		checkLen(op, "weight", len(w), n)
	}
	if b != nil {
		checkLen(op, "bias", len(b), n)
	}
}
