package cpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/cpu"
)

// BenchmarkFork times kernels at the sizes around their serial thresholds, where
// handing work to a second goroutine costs about what it saves, one after the other
// (the workers stay awake): compare 1 and 2 threads (at 1 nothing forks). Add and the
// sums over all and over the batch (a bias's gradient, [n/1024, 1024] to [1, 1024]) at
// 8K to 16M elements, GB/s of the bytes read and written once; Sgemm of n×n matrices,
// GFLOP/s. The package's tests lower gemmGrain and gemmWake (TestMain), so every
// product here runs the parallel driver at 2 threads. cpu-ns/op is the process's CPU
// time per op, a spinning worker's included.
//
// Run each thread count in a process of its own, GOMAXPROCS=N with -test.cpu N: given
// several -cpu values, testing times a b.Loop benchmark's first one at the GOMAXPROCS
// of the last (golang/go#49980; seen with Go 1.26.8).
func BenchmarkFork(b *testing.B) {
	for _, n := range []int{1 << 13, 1 << 14, 1 << 15, 1 << 16, 1 << 17, 1 << 18, 1 << 20, 1 << 24} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(i%100)/50 - 1
		}
		out := make([]float32, n)
		rows := cpu.F32(x, kernels.Contiguous(n/1024, 1024))
		for _, c := range []struct {
			name  string
			bytes int
			run   func()
		}{
			{"add", 12 * n, func() {
				cpu.Binary(kernels.Add, cpu.F32(out, kernels.Contiguous(n)), cpu.F32(x, kernels.Contiguous(n)), cpu.F32(x, kernels.Contiguous(n)))
			}},
			{"sum-all", 4 * n, func() { cpu.Sum(cpu.F32(out[:1], kernels.Layout{}), rows) }},
			{"sum-cols", 4 * n, func() { cpu.Sum(cpu.F32(out[:1024], kernels.Contiguous(1, 1024)), rows) }},
		} {
			b.Run(fmt.Sprintf("%s/%dK", c.name, n>>10), func(b *testing.B) {
				b.SetBytes(int64(c.bytes))
				cpu.ReportCPU(b, c.run)
			})
		}
	}
	for _, n := range []int{64, 96, 128, 160, 192, 256, 512, 1024} {
		b.Run(fmt.Sprintf("sgemm/%d", n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			a, bm, c := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
			for i := range a {
				a[i], bm[i] = r.Float32(), r.Float32()
			}
			cpu.ReportCPU(b, func() { cpu.Sgemm(false, false, n, n, n, 1, a, n, bm, n, 0, c, n) })
			b.ReportMetric(2*float64(n*n*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
