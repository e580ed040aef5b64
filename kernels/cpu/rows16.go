package cpu

import "github.com/subletml/sublet/dtype"

// The row kernels over 16-bit storage: softmax, layer norm and cross-entropy whose row
// operands are F16 or BF16 (one of them for a call) compute in float32. Each converts a
// row (or a block of columns) at a time into a small float32 buffer, exactly, runs the
// float32 code on it and rounds each output once to the storage type: the bits of
// converting the whole operands to float32, running the float32 kernel and converting
// its outputs back, without temporaries of the operands' size. The statistics (mean,
// rstd, lse) and dw, db stay float32.

// half is a 16-bit float storage type, F16 or BF16, whose elements are held as uint16
// bits.
type half dtype.DType

// load converts src into dst (of src's length), exactly.
func (h half) load(dst []float32, src []uint16) {
	if dtype.DType(h) == dtype.F16 {
		dtype.F16sToF32s(dst[:len(src)], src)
		return
	}
	dtype.BF16sToF32s(dst[:len(src)], src)
}

// store rounds src into dst (of dst's length) once.
func (h half) store(dst []uint16, src []float32) {
	if dtype.DType(h) == dtype.F16 {
		dtype.F32sToF16s(dst, src[:len(dst)])
		return
	}
	dtype.F32sToBF16s(dst, src[:len(dst)])
}

// all returns s converted into a new float32 slice (nil for nil): the [n] affine
// operands of layer norm.
func (h half) all(s []uint16) []float32 {
	if s == nil {
		return nil
	}
	f := make([]float32, len(s))
	h.load(f, s)
	return f
}

// gather converts the block of w columns at s (elements p·stride + j, p < n, j < w)
// into buf, packed as rows of w.
func (h half) gather(buf []float32, s []uint16, n, stride, w int) {
	for p := range n {
		h.load(buf[p*w:(p+1)*w], s[p*stride:p*stride+w])
	}
}

// scatter rounds the packed block buf back into s, the inverse of gather.
func (h half) scatter(s []uint16, buf []float32, n, stride, w int) {
	for p := range n {
		h.store(s[p*stride:p*stride+w], buf[p*w:(p+1)*w])
	}
}

// forRowBufs calls fn for every row i < rows of n elements, in parallel as forRows,
// with bufs float32 buffers of n elements each, one set per worker.
func forRowBufs(rows, n, bufs int, fn func(i int, buf [][]float32)) {
	parallelFor(rows, max(1, grain/max(n, 1)), func(lo, hi int) {
		buf := make([][]float32, bufs)
		for k := range buf {
			buf[k] = make([]float32, n)
		}
		for i := lo; i < hi; i++ {
			fn(i, buf)
		}
	})
}

// softmax16 is softmax over 16-bit rows.
func softmax16(op string, h half, dst, x []uint16, outer, n, inner int, log bool) {
	checkAxis(op, outer, n, inner, dst, x)
	if n == 0 {
		return
	}
	if inner == 1 {
		forRowBufs(outer, n, 1, func(i int, buf [][]float32) {
			h.load(buf[0], x[i*n:(i+1)*n])
			softmaxRow(buf[0], buf[0], log)
			h.store(dst[i*n:(i+1)*n], buf[0])
		})
		return
	}
	forAxis(outer, n, inner, func(base, w int) {
		buf := make([]float32, n*w)
		h.gather(buf, x[base:], n, inner, w)
		softmaxBlock(buf, buf, n, w, w, log)
		h.scatter(dst[base:], buf, n, inner, w)
	})
}

// softmaxBackward16 is softmaxBackward over 16-bit rows.
func softmaxBackward16(op string, h half, dx, g, y []uint16, outer, n, inner int, log bool) {
	checkAxis(op, outer, n, inner, dx, g, y)
	if n == 0 {
		return
	}
	if inner == 1 {
		forRowBufs(outer, n, 2, func(i int, buf [][]float32) {
			h.load(buf[0], g[i*n:(i+1)*n])
			h.load(buf[1], y[i*n:(i+1)*n])
			softmaxBackwardRow(buf[0], buf[0], buf[1], log)
			h.store(dx[i*n:(i+1)*n], buf[0])
		})
		return
	}
	forAxis(outer, n, inner, func(base, w int) {
		gb, yb := make([]float32, n*w), make([]float32, n*w)
		h.gather(gb, g[base:], n, inner, w)
		h.gather(yb, y[base:], n, inner, w)
		softmaxBackwardBlock(gb, gb, yb, n, w, w, log)
		h.scatter(dx[base:], gb, n, inner, w)
	})
}

// layerNorm16 is LayerNorm over 16-bit x, y, w and b, with float32 mean and rstd.
func layerNorm16(h half, y, x, w, b []uint16, mean, rstd []float32, rows, n int, eps float64) {
	const op = "layer_norm"
	checkRowStats(op, "y", len(x), len(y), len(mean), len(rstd), rows, n)
	checkAffine(op, w, b, n)
	wf, bf := h.all(w), h.all(b)
	forRowBufs(rows, n, 1, func(i int, buf [][]float32) {
		h.load(buf[0], x[i*n:(i+1)*n])
		mean[i], rstd[i] = layerNormRow(buf[0], buf[0], wf, bf, eps)
		h.store(y[i*n:(i+1)*n], buf[0])
	})
}

// layerNormBackward16 is LayerNormBackward over 16-bit dx, g, x and w, with float32
// mean, rstd, dw and db.
func layerNormBackward16(h half, dx, g, x, w []uint16, dw, db, mean, rstd []float32, rows, n int) {
	const op = "layer_norm backward"
	checkRowStats(op, "g", len(x), len(g), len(mean), len(rstd), rows, n)
	checkAffine(op, w, nil, n)
	checkAffine(op, dw, db, n)
	layerNormDwdb(dw, db, rows, n, func(sw, sb *[chunk]float64, i, j0, cols int) {
		var gb, xb [chunk]float32
		h.load(gb[:], g[i*n+j0:i*n+j0+cols])
		h.load(xb[:], x[i*n+j0:i*n+j0+cols])
		dwdbAdd(sw, sb, gb[:cols], xb[:cols], mean[i], rstd[i])
	})
	if dx == nil {
		return
	}
	checkLen(op, "dx", len(dx), rows*n)
	wf := h.all(w)
	forRowBufs(rows, n, 2, func(i int, buf [][]float32) {
		h.load(buf[0], g[i*n:(i+1)*n])
		h.load(buf[1], x[i*n:(i+1)*n])
		layerNormDxRow(buf[0], buf[0], buf[1], wf, mean[i], rstd[i])
		h.store(dx[i*n:(i+1)*n], buf[0])
	})
}

// crossEntropy16 is CrossEntropy over 16-bit logits, with a float32 lse.
func crossEntropy16(h half, lse []float32, logits []uint16, labels []int64, n, c int, ignore int64) (float32, error) {
	const op = "cross_entropy"
	checkLen(op, "logits", len(logits), n*c)
	if err := checkCrossEntropy(op, lse, labels, n, c, ignore); err != nil {
		return 0, err
	}
	forRowBufs(n, c, 1, func(i int, buf [][]float32) {
		h.load(buf[0], logits[i*c:(i+1)*c])
		lse[i] = logSumExp(buf[0])
	})
	var v [1]float32
	return float32(crossEntropyMean(lse, labels, ignore, func(i int, l int64) float64 {
		h.load(v[:], logits[i*c+int(l):i*c+int(l)+1])
		return float64(v[0])
	})), nil
}

// crossEntropyBackward16 is CrossEntropyBackward over 16-bit logits and dlogits, with a
// float32 lse.
func crossEntropyBackward16(h half, dlogits, logits []uint16, lse []float32, labels []int64, n, c int, ignore int64, g float64) {
	checkCrossEntropyBackward("cross_entropy backward", len(dlogits), len(logits), len(lse), len(labels), n, c)
	scale := float32(g) / lse[n]
	forRowBufs(n, c, 1, func(i int, buf [][]float32) {
		out := dlogits[i*c : (i+1)*c]
		if labels[i] == ignore {
			clear(out)
			return
		}
		h.load(buf[0], logits[i*c:(i+1)*c])
		crossEntropyGradRow(buf[0], buf[0], lse[i], scale, labels[i])
		h.store(out, buf[0])
	})
}
