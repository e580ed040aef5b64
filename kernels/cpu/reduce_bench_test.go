package cpu

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/subletml/sublet/kernels"
)

// BenchmarkBandwidth times the reductions in every layout the backward pass uses beside
// Add, in bytes read and written per second (SetBytes), at 1M elements (4 MiB, in the
// caches) and 16M (64 MiB, from memory where the last-level cache is smaller): a
// reduction reads its input once, as fast as Add moves its three operands (two inputs
// of their own: x+x would read one stream twice, the second time from the L1 cache)
// when it runs at memory bandwidth. The layouts are a [rows, 1024] float32 matrix
// reduced to a scalar (all), over its last axis (rows: a mean over features, an argmax),
// over its first (cols: a bias's gradient, the sum over the batch), and a [64, rows/64,
// 1024] reduced over its middle axis (a broadcast gradient summed to [64, 1, 1024]); norm
// is the sum of squares of all (SumSquares, the 2-norm's). Each case beside Add also
// reports its bandwidth as a percentage of Add's at the same size, from calls of the two
// in turn after the case's loop (%add, pairedRatio): each then finds the other's data in
// the caches, so at 1M the percentage compares the two from the last-level cache where
// the GB/s of the case's own loop may come from the caches of the cores (4 MiB fits the
// L2s of two cores of the development machine).
func BenchmarkBandwidth(b *testing.B) {
	const width = 1024
	for _, n := range []int{1 << 20, 1 << 24} {
		rows := n / width
		x, a, c := benchData(n), benchData(n), benchData(n)
		src2 := F32(x, kernels.Contiguous(rows, width))
		out := make([]float32, n)
		idx := make([]int64, rows)
		cases := []struct {
			name  string
			bytes int
			run   func()
		}{
			{"add", 12 * n, func() {
				d := F32(out, kernels.Contiguous(n))
				Binary(kernels.Add, d, F32(a, kernels.Contiguous(n)), F32(c, kernels.Contiguous(n)))
			}},
			{"sum-all", 4 * n, func() { Sum(F32(out[:1], kernels.Layout{}), src2) }},
			{"sum-rows", 4 * n, func() { Sum(F32(out[:rows], kernels.Contiguous(rows, 1)), src2) }},
			{"sum-cols", 4 * n, func() { Sum(F32(out[:width], kernels.Contiguous(1, width)), src2) }},
			{"sum-middle", 4 * n, func() {
				Sum(F32(out[:64*width], kernels.Contiguous(64, 1, width)), F32(x, kernels.Contiguous(64, rows/64, width)))
			}},
			{"mean-all", 4 * n, func() { Mean(F32(out[:1], kernels.Layout{}), src2) }},
			{"mean-cols", 4 * n, func() { Mean(F32(out[:width], kernels.Contiguous(1, width)), src2) }},
			{"norm", 4 * n, func() { SumSquares(F32(out[:1], kernels.Layout{}), src2) }},
			{"max-all", 4 * n, func() { Max(F32(out[:1], kernels.Layout{}), idx[:1], src2) }},
			{"max-rows", 4 * n, func() { Max(F32(out[:rows], kernels.Contiguous(rows, 1)), idx, src2) }},
			{"max-cols", 4 * n, func() { Max(F32(out[:width], kernels.Contiguous(1, width)), idx[:width], src2) }},
		}
		for _, c := range cases {
			b.Run(fmt.Sprintf("%s/%dM", c.name, n>>20), func(b *testing.B) {
				b.SetBytes(int64(c.bytes))
				for b.Loop() {
					c.run()
				}
				if c.name != "add" {
					r := pairedRatio(c.run, cases[0].run, b.Elapsed())
					b.ReportMetric(100*r*float64(c.bytes)/float64(cases[0].bytes), "%add")
				}
			})
		}
	}
}

// pairedRatio is the median, over calls of run and ref in turn for about d (at most a
// second, at least 9 pairs), of ref's time over run's: the load of a shared machine
// moves within a run, and neighbouring calls see the same.
func pairedRatio(run, ref func(), d time.Duration) float64 {
	d = min(d, time.Second)
	var ratios []float64
	for start := time.Now(); len(ratios) < 9 || time.Since(start) < d; {
		t0 := time.Now()
		run()
		t1 := time.Now()
		ref()
		ratios = append(ratios, time.Since(t1).Seconds()/t1.Sub(t0).Seconds())
	}
	slices.Sort(ratios)
	return ratios[len(ratios)/2]
}
