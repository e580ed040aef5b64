package cpu

import (
	"testing"

	"github.com/subletml/sublet/kernels"
)

// The benchmarks below time the float32 kernels beside the elementwise ones, over
// 1M elements (1024 rows of 1024 where a kernel works by rows).
const benchRows, benchCols = 1024, 1024

func benchData(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i%100)/50 - 1
	}
	return x
}

func BenchmarkSum1M(b *testing.B) {
	x := benchData(benchRows * benchCols)
	var out [1]float32
	src, dst := F32(x, kernels.Contiguous(len(x))), F32(out[:], kernels.Layout{})
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		Sum(dst, src)
	}
}

func BenchmarkSumRows1M(b *testing.B) {
	x := benchData(benchRows * benchCols)
	out := make([]float32, benchRows)
	src, dst := F32(x, kernels.Contiguous(benchRows, benchCols)), F32(out, kernels.Contiguous(benchRows, 1))
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		Sum(dst, src)
	}
}

func BenchmarkCopyF32ToF16_1M(b *testing.B) {
	x := benchData(benchRows * benchCols)
	h := make([]uint16, len(x))
	l := kernels.Contiguous(len(x))
	src, dst := F32(x, l), F16(h, l)
	b.SetBytes(int64(6 * len(x)))
	for b.Loop() {
		Copy(dst, src)
	}
}

func BenchmarkCopyTranspose1M(b *testing.B) {
	x := benchData(benchRows * benchCols)
	y := make([]float32, len(x))
	src := F32(x, kernels.Layout{Shape: []int{benchCols, benchRows}, Strides: []int{1, benchCols}})
	dst := F32(y, kernels.Contiguous(benchCols, benchRows))
	b.SetBytes(int64(8 * len(x)))
	for b.Loop() {
		Copy(dst, src)
	}
}

func BenchmarkSoftmax1M(b *testing.B) {
	x := benchData(benchRows * benchCols)
	y := make([]float32, len(x))
	b.SetBytes(int64(8 * len(x)))
	for b.Loop() {
		Softmax(y, x, benchRows, benchCols, 1)
	}
}

func BenchmarkLayerNorm1M(b *testing.B) {
	x := benchData(benchRows * benchCols)
	y := make([]float32, len(x))
	mean, rstd := make([]float32, benchRows), make([]float32, benchRows)
	w, bias := benchData(benchCols), benchData(benchCols)
	b.SetBytes(int64(8 * len(x)))
	for b.Loop() {
		LayerNorm(y, mean, rstd, x, w, bias, benchRows, benchCols, 1e-5)
	}
}

func BenchmarkCrossEntropy1M(b *testing.B) {
	x := benchData(benchRows * benchCols)
	lse := make([]float32, benchRows+1)
	labels := make([]int64, benchRows)
	for i := range labels {
		labels[i] = int64(i % benchCols)
	}
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		if _, err := CrossEntropy(lse, x, labels, benchRows, benchCols, NoIgnore); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAdamStep1M(b *testing.B) {
	p, g := benchData(benchRows*benchCols), benchData(benchRows*benchCols)
	m, v := make([]float32, len(p)), make([]float32, len(p))
	c := kernels.Adam{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	b.SetBytes(int64(4 * len(p)))
	for b.Loop() {
		AdamStep(c, 3, p, g, m, v)
	}
}

func BenchmarkSGDStep1M(b *testing.B) {
	p, g := benchData(benchRows*benchCols), benchData(benchRows*benchCols)
	buf := make([]float32, len(p))
	c := kernels.SGD{LR: 0.01, Momentum: 0.9}
	b.SetBytes(int64(4 * len(p)))
	for b.Loop() {
		SGDStep(c, p, g, buf, false)
	}
}

func BenchmarkMaxRows1M(b *testing.B) {
	x := benchData(benchRows * benchCols)
	out := make([]float32, benchRows)
	idx := make([]int64, benchRows)
	src, dst := F32(x, kernels.Contiguous(benchRows, benchCols)), F32(out, kernels.Contiguous(benchRows, 1))
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		Max(dst, idx, src)
	}
}
