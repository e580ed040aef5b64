package cpu

import "math"

// LayerNorm normalizes each of the rows of x ([rows, n], row-major) to zero mean and
// unit variance, then scales by w and shifts by b (n floats each; nil for none):
// y = (x - mean)·rstd·w + b with rstd = 1/√(var + eps), var the biased variance, eps
// rounded to T (as PyTorch's float kernel takes it). It saves each row's mean and rstd
// (rows floats each) for LayerNormBackward. y may be x. Moments accumulate in float64.
func LayerNorm[T float](y, mean, rstd, x, w, b []T, rows, n int, eps float64) {
	const op = "layer_norm"
	checkLen(op, "x", len(x), rows*n)
	checkLen(op, "y", len(y), rows*n)
	checkLen(op, "mean", len(mean), rows)
	checkLen(op, "rstd", len(rstd), rows)
	checkAffine(op, w, b, n)
	parallelFor(rows, max(1, grain/max(n, 1)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := x[i*n : (i+1)*n]
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
			r := T(1 / math.Sqrt(ss/float64(n)+float64(T(eps))))
			m := T(mu)
			mean[i], rstd[i] = m, r
			out := y[i*n : (i+1)*n]
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
		}
	})
}

// LayerNormBackward writes the gradients of LayerNorm given the output's gradient g:
// dx (may be nil, or g itself), dw and db (n floats each, written not accumulated; nil
// when not wanted). w is LayerNorm's weight (nil if it had none); mean and rstd are
// what it saved. dw and db sum over rows in row order per column, so they are
// deterministic.
func LayerNormBackward[T float](dx, dw, db, g, x, mean, rstd, w []T, rows, n int) {
	const op = "layer_norm backward"
	checkLen(op, "x", len(x), rows*n)
	checkLen(op, "g", len(g), rows*n)
	checkLen(op, "mean", len(mean), rows)
	checkLen(op, "rstd", len(rstd), rows)
	checkAffine(op, w, nil, n)
	checkAffine(op, dw, db, n)
	if dw != nil || db != nil {
		// Columns are independent: each block of columns sums its rows in order. This
		// runs before dx so dx may overwrite g.
		blocks := (n + chunk - 1) / chunk
		parallelFor(blocks, max(1, grain/max(rows*chunk, 1)), func(lo, hi int) {
			for blk := lo; blk < hi; blk++ {
				j0 := blk * chunk
				width := min(chunk, n-j0)
				var sw, sb [chunk]float64
				for i := range rows {
					m, r := mean[i], rstd[i]
					gr := g[i*n+j0 : i*n+j0+width]
					xr := x[i*n+j0 : i*n+j0+width]
					for j, gv := range gr {
						sw[j] += float64(gv * (xr[j] - m) * r)
						sb[j] += float64(gv)
					}
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
	if dx == nil {
		return
	}
	checkLen(op, "dx", len(dx), rows*n)
	parallelFor(rows, max(1, grain/max(n, 1)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			m, r := mean[i], rstd[i]
			gr := g[i*n : (i+1)*n]
			xr := x[i*n : (i+1)*n]
			// dx = rstd·(ĝ - mean(ĝ) - x̂·mean(ĝ·x̂)) with ĝ = g·w, x̂ = (x-mean)·rstd.
			var sg, sgx float64
			for j, gv := range gr {
				if w != nil {
					gv *= w[j]
				}
				sg += float64(gv)
				sgx += float64(gv * (xr[j] - m) * r)
			}
			mg, mgx := T(sg/float64(n)), T(sgx/float64(n))
			out := dx[i*n : (i+1)*n]
			for j, gv := range gr {
				if w != nil {
					gv *= w[j]
				}
				out[j] = r * (gv - mg - (xr[j]-m)*r*mgx)
			}
		}
	})
}

func checkAffine[T float](op string, w, b []T, n int) {
	if w != nil {
		checkLen(op, "weight", len(w), n)
	}
	if b != nil {
		checkLen(op, "bias", len(b), n)
	}
}
