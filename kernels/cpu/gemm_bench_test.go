package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

var gemmBenchSizes = []int{256, 1024, 2048}

// benchSquare runs gemm on n×n matrices and reports GFLOP/s (2n³ flops per product).
func benchSquare(b *testing.B, gemm func(n int, a, bm, c []float32)) {
	for _, n := range gemmBenchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			a := make([]float32, n*n)
			bm := make([]float32, n*n)
			c := make([]float32, n*n)
			for i := range a {
				a[i], bm[i] = r.Float32(), r.Float32()
			}
			for b.Loop() {
				gemm(n, a, bm, c)
			}
			b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkSgemm measures the built-in GEMM (GemmKernel names the micro-kernel).
func BenchmarkSgemm(b *testing.B) {
	b.Logf("micro-kernel %s", GemmKernel())
	benchSquare(b, func(n int, a, bm, c []float32) {
		Sgemm(false, false, n, n, n, 1, a, n, bm, n, 0, c, n)
	})
}

// BenchmarkSgemmGonum measures gonum's blas32 on the same products.
func BenchmarkSgemmGonum(b *testing.B) {
	benchSquare(b, func(n int, a, bm, c []float32) {
		g := func(s []float32) blas32.General { return blas32.General{Rows: n, Cols: n, Stride: n, Data: s} }
		blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, g(a), g(bm), 0, g(c))
	})
}
