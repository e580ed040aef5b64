package cpu

import (
	"fmt"
	"math"
)

// The softmax kernels work along the middle axis of a contiguous float32 or float64
// array (computed in its own type) viewed as [outer, n, inner]: the axis a tensor's softmax(dim) names, with outer the product
// of the dimensions before it and inner of those after. Sums accumulate in float64 in
// index order. Every output may be the same slice as the input it replaces (in place).

// Softmax writes exp(x - max) / Σ exp(x - max) into dst along the axis.
func Softmax[T float](dst, x []T, outer, n, inner int) {
	softmax("softmax", dst, x, outer, n, inner, false)
}

// LogSoftmax writes x - max - log Σ exp(x - max) into dst along the axis.
func LogSoftmax[T float](dst, x []T, outer, n, inner int) {
	softmax("log_softmax", dst, x, outer, n, inner, true)
}

// SoftmaxBackward writes dx = y·(g - Σ g·y) given Softmax's output y and the output's
// gradient g; dx may be g.
func SoftmaxBackward[T float](dx, g, y []T, outer, n, inner int) {
	softmaxBackward("softmax backward", dx, g, y, outer, n, inner, false)
}

// LogSoftmaxBackward writes dx = g - exp(y)·Σ g given LogSoftmax's output y and the
// output's gradient g; dx may be g.
func LogSoftmaxBackward[T float](dx, g, y []T, outer, n, inner int) {
	softmaxBackward("log_softmax backward", dx, g, y, outer, n, inner, true)
}

func checkAxis[T any](op string, outer, n, inner int, slices ...[]T) {
	size := outer * n * inner
	if outer < 0 || n < 0 || inner < 0 {
		panic(fmt.Sprintf("kernels/cpu: %s: negative size [%d, %d, %d]", op, outer, n, inner))
	}
	for _, s := range slices {
		if len(s) != size {
			panic(fmt.Sprintf("kernels/cpu: %s: slice of %d floats for [%d, %d, %d] = %d", op, len(s), outer, n, inner, size))
		}
	}
}

// forAxis calls fn for every block of at most chunk consecutive inner positions of
// every outer index, in parallel: fn handles the n·w elements base + p·inner + j for
// p < n, j < w.
func forAxis(outer, n, inner int, fn func(base, w int)) {
	blocks := (inner + chunk - 1) / chunk
	parallelFor(outer*blocks, max(1, grain/max(n*min(inner, chunk), 1)), func(lo, hi int) {
		for t := lo; t < hi; t++ {
			o, b := t/blocks, t%blocks
			j0 := b * chunk
			fn(o*n*inner+j0, min(chunk, inner-j0))
		}
	})
}

func softmax[T float](op string, dst, x []T, outer, n, inner int, log bool) {
	checkAxis(op, outer, n, inner, dst, x)
	if n == 0 {
		return
	}
	if inner == 1 {
		forRows(outer, n, func(i int) { softmaxRow(dst[i*n:(i+1)*n], x[i*n:(i+1)*n], log) })
		return
	}
	forAxis(outer, n, inner, func(base, w int) { softmaxBlock(dst[base:], x[base:], n, inner, w, log) })
}

// softmaxBlock is the softmax (or log-softmax) of w ≤ chunk adjacent columns: the
// elements p·stride + j of x for p < n, j < w (and of dst).
func softmaxBlock[T float](dst, x []T, n, stride, w int, log bool) {
	var mx [chunk]T
	var sum [chunk]float64
	for j := range w {
		mx[j], sum[j] = T(math.Inf(-1)), 0
	}
	for p := range n {
		row := x[p*stride : p*stride+w]
		for j, v := range row {
			if v > mx[j] || v != v {
				mx[j] = v
			}
		}
	}
	for p := range n {
		row := x[p*stride : p*stride+w]
		out := dst[p*stride : p*stride+w]
		for j, v := range row {
			out[j] = v - mx[j]
		}
		es := out
		if log { // keep x - max; the exponentials are only summed
			var buf [chunk]T
			es = buf[:w]
		}
		expTo(es, out)
		for j, e := range es {
			sum[j] += float64(e)
		}
	}
	var scale [chunk]T
	for j := range w {
		if log {
			scale[j] = T(math.Log(sum[j]))
		} else {
			scale[j] = T(1 / sum[j])
		}
	}
	for p := range n {
		out := dst[p*stride : p*stride+w]
		for j := range out {
			if log {
				out[j] -= scale[j]
			} else {
				out[j] *= scale[j]
			}
		}
	}
}

func softmaxBackward[T float](op string, dx, g, y []T, outer, n, inner int, log bool) {
	checkAxis(op, outer, n, inner, dx, g, y)
	if inner == 1 {
		forRows(outer, n, func(i int) { softmaxBackwardRow(dx[i*n:(i+1)*n], g[i*n:(i+1)*n], y[i*n:(i+1)*n], log) })
		return
	}
	forAxis(outer, n, inner, func(base, w int) { softmaxBackwardBlock(dx[base:], g[base:], y[base:], n, inner, w, log) })
}

// softmaxBackwardBlock is SoftmaxBackward (or LogSoftmaxBackward) on w ≤ chunk adjacent
// columns, laid out as softmaxBlock's.
func softmaxBackwardBlock[T float](dx, g, y []T, n, stride, w int, log bool) {
	var dot [chunk]float64
	for p := range n {
		gr := g[p*stride : p*stride+w]
		yr := y[p*stride : p*stride+w]
		for j, gv := range gr {
			if log {
				dot[j] += float64(gv)
			} else {
				dot[j] += float64(gv) * float64(yr[j])
			}
		}
	}
	for p := range n {
		gr := g[p*stride : p*stride+w]
		yr := y[p*stride : p*stride+w]
		out := dx[p*stride : p*stride+w]
		if log {
			var e [chunk]T
			expTo(e[:w], yr)
			for j, gv := range gr {
				out[j] = gv - e[j]*T(dot[j])
			}
			continue
		}
		for j, gv := range gr {
			out[j] = yr[j] * (gv - T(dot[j]))
		}
	}
}

// forRows calls fn(i) for every row i < rows of n elements, in parallel.
func forRows(rows, n int, fn func(i int)) {
	parallelFor(rows, max(1, grain/max(n, 1)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			fn(i)
		}
	})
}

// sumExp returns Σ e^v[i] in float64, in order. It replaces v with e^v unless keep.
func sumExp[T float](v []T, keep bool) float64 {
	var sum float64
	forChunks(len(v), func(lo, hi int) {
		var buf [chunk]T
		es := v[lo:hi]
		if keep {
			es = buf[:hi-lo]
		}
		expTo(es, v[lo:hi])
		for _, e := range es {
			sum += float64(e)
		}
	})
	return sum
}

// softmaxRow is the softmax (or log-softmax) of one contiguous row.
func softmaxRow[T float](dst, x []T, log bool) {
	dst = dst[:len(x)]
	mx := T(math.Inf(-1))
	for _, v := range x {
		if v > mx || v != v {
			mx = v
		}
	}
	for i, v := range x {
		dst[i] = v - mx
	}
	sum := sumExp(dst, log)
	if log {
		ls := T(math.Log(sum))
		for i := range dst {
			dst[i] -= ls
		}
		return
	}
	scale := T(1 / sum)
	for i := range dst {
		dst[i] *= scale
	}
}

// softmaxBackwardRow is SoftmaxBackward (or LogSoftmaxBackward) on one contiguous row.
func softmaxBackwardRow[T float](dx, g, y []T, log bool) {
	dx, y = dx[:len(g)], y[:len(g)]
	var dot float64
	for i, gv := range g {
		if log {
			dot += float64(gv)
		} else {
			dot += float64(gv) * float64(y[i])
		}
	}
	d := T(dot)
	if !log {
		for i, gv := range g {
			dx[i] = y[i] * (gv - d)
		}
		return
	}
	forChunks(len(g), func(lo, hi int) {
		var e [chunk]T
		es := e[:hi-lo]
		expTo(es, y[lo:hi])
		for i, ev := range es {
			dx[lo+i] = g[lo+i] - ev*d
		}
	})
}
