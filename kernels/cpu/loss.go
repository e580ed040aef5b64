package cpu

import "math"

// NoIgnore is the ignore index that ignores no label.
const NoIgnore int64 = math.MinInt64

// CrossEntropy returns the mean over the rows whose label is not ignore of
// -log softmax(logits[i])[labels[i]], for row-major logits [n, c] and n labels
// (PyTorch's default ignore index is -100; pass NoIgnore to count every row). It
// stores each row's log-sum-exp in lse[:n] and the number of rows that count, rounded
// to T, in lse[n] (n+1 floats) for CrossEntropyBackward. With every row ignored the
// loss is NaN, as in PyTorch. A label outside [0, c) that is not ignore is an
// *kernels.IndexError, and then nothing is written.
func CrossEntropy[T float](lse, logits []T, labels []int64, n, c int, ignore int64) (T, error) {
	const op = "cross_entropy"
	checkLen(op, "logits", len(logits), n*c)
	if err := checkCrossEntropy(op, lse, labels, n, c, ignore); err != nil {
		return 0, err
	}
	forRange(n, max(1, grain/max(c, 1)), lseRows[T]{lse: lse, logits: logits, c: c})
	return T(crossEntropyMean(lse, labels, ignore, func(i int, l int64) float64 { return float64(logits[i*c+int(l)]) })), nil
}

// lseRows is CrossEntropy's pass over rows for forRange: each row's log-sum-exp.
type lseRows[T float] struct {
	lse, logits []T
	c           int
}

func (r lseRows[T]) run(lo, hi int) {
	for i := lo; i < hi; i++ {
		r.lse[i] = logSumExp(r.logits[i*r.c : (i+1)*r.c])
	}
}

// checkCrossEntropy checks the lengths of lse (n+1) and labels (n), and the labels.
func checkCrossEntropy[T float](op string, lse []T, labels []int64, n, c int, ignore int64) error {
	checkLen(op, "labels", len(labels), n)
	checkLen(op, "lse", len(lse), n+1)
	return checkIndices(op, labels, c, ignore)
}

// crossEntropyMean stores in lse[n] the count of the rows whose label is not ignore and
// returns the mean of lse[i] - logit(i, label) over them, summed in float64 in row
// order (NaN when there are none).
func crossEntropyMean[T float](lse []T, labels []int64, ignore int64, logit func(i int, l int64) float64) float64 {
	var sum float64
	count := 0
	for i, l := range labels {
		if l == ignore {
			continue
		}
		sum += float64(lse[i]) - logit(i, l)
		count++
	}
	lse[len(labels)] = T(count)
	return sum / float64(count)
}

// CrossEntropyBackward writes the gradient of CrossEntropy's loss, scaled by g (the
// loss's own gradient), into dlogits: (softmax(logits[i]) - onehot(labels[i]))·g/count
// for counted rows, 0 for ignored ones, g rounded to T and count lse[n]. lse is what
// CrossEntropy stored; dlogits may be logits (in place). The labels are those
// CrossEntropy accepted.
func CrossEntropyBackward[T float](dlogits, logits, lse []T, labels []int64, n, c int, ignore int64, g float64) {
	const op = "cross_entropy backward"
	checkCrossEntropyBackward(op, len(dlogits), len(logits), len(lse), len(labels), n, c)
	scale := T(g) / lse[n]
	forRange(n, max(1, grain/max(c, 1)), gradRows[T]{dlogits: dlogits, logits: logits, lse: lse, labels: labels, c: c, ignore: ignore, scale: scale})
}

// gradRows is CrossEntropyBackward's pass over rows for forRange.
type gradRows[T float] struct {
	dlogits, logits, lse []T
	labels               []int64
	c                    int
	ignore               int64
	scale                T
}

func (r gradRows[T]) run(lo, hi int) {
	c := r.c
	for i := lo; i < hi; i++ {
		out := r.dlogits[i*c : (i+1)*c]
		if r.labels[i] == r.ignore {
			clear(out)
			continue
		}
		crossEntropyGradRow(out, r.logits[i*c:(i+1)*c], r.lse[i], r.scale, r.labels[i])
	}
}

// checkCrossEntropyBackward checks CrossEntropyBackward's lengths.
func checkCrossEntropyBackward(op string, dlogits, logits, lse, labels, n, c int) {
	checkLen(op, "logits", logits, n*c)
	checkLen(op, "dlogits", dlogits, n*c)
	checkLen(op, "labels", labels, n)
	checkLen(op, "lse", lse, n+1)
}

// crossEntropyGradRow writes a counted row's gradient (softmax(row) - onehot(label))·scale
// into out (which may be row), from the row's log-sum-exp m.
func crossEntropyGradRow[T float](out, row []T, m, scale T, label int64) {
	for j, v := range row {
		out[j] = v - m
	}
	expTo(out, out)
	for j := range out {
		out[j] *= scale
	}
	out[label] -= scale
}

// logSumExp is log Σ exp(x) computed stably, accumulating in float64.
func logSumExp[T float](x []T) T {
	mx := T(math.Inf(-1))
	for _, v := range x {
		if v > mx || v != v {
			mx = v
		}
	}
	if isInf(mx) {
		return mx // all -Inf (or a +Inf): the sum is exp(mx)
	}
	var s float64
	forChunks(len(x), func(lo, hi int) {
		var buf [chunk]T
		es := buf[:hi-lo]
		for i, v := range x[lo:hi] {
			es[i] = v - mx
		}
		s += sumExp(es, false)
	})
	return mx + T(math.Log(s))
}

// MSE returns the mean of (a-b)² over len(a) elements, summed in float64 in pieces of a
// fixed size added in order; NaN for empty inputs.
func MSE[T float](a, b []T) T {
	checkLen("mse", "b", len(b), len(a))
	s := sumPieces(len(a), func(lo, hi int) float64 {
		var s float64
		for i := lo; i < hi; i++ {
			d := float64(a[i]) - float64(b[i])
			s += d * d
		}
		return s
	})
	return T(s / float64(len(a)))
}

// MSEBackward writes the gradient of MSE, scaled by g (rounded to T), into da
// (2g(a-b)/n) and db (its negation); either may be nil when not needed, and either may
// be its own input.
func MSEBackward[T float](da, db, a, b []T, g float64) {
	const op = "mse backward"
	checkLen(op, "b", len(b), len(a))
	if da != nil {
		checkLen(op, "da", len(da), len(a))
	}
	if db != nil {
		checkLen(op, "db", len(db), len(a))
	}
	scale := 2 * T(g) / T(len(a))
	parallelFor(len(a), grain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d := (a[i] - b[i]) * scale
			if da != nil {
				da[i] = d
			}
			if db != nil {
				db[i] = -d
			}
		}
	})
}

// sumPieces returns Σ piece(lo, hi) over [0, n) cut into pieces of reducePiece, computed
// in parallel and added in order, so the result does not depend on GOMAXPROCS.
func sumPieces(n int, piece func(lo, hi int) float64) float64 {
	pieces := (n + reducePiece - 1) / reducePiece
	if pieces <= 1 {
		return piece(0, n)
	}
	part := make([]float64, pieces)
	parallelFor(pieces, max(1, grain/reducePiece), func(lo, hi int) {
		for p := lo; p < hi; p++ {
			part[p] = piece(p*reducePiece, min((p+1)*reducePiece, n))
		}
	})
	var s float64
	for _, v := range part {
		s += v
	}
	return s
}
