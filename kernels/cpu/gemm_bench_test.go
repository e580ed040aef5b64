package cpu_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/cpu"
	sysblas "github.com/subletml/sublet/kernels/cpu/blas"
)

var gemmBenchSizes = []int{256, 1024, 2048}

// benchSquare times the product that prepare sets up for n×n matrices a, b and c, and
// reports GFLOP/s (2n³ flops per product).
func benchSquare(b *testing.B, prepare func(n int, a, bm, c []float32) func()) {
	for _, n := range gemmBenchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			a := make([]float32, n*n)
			bm := make([]float32, n*n)
			c := make([]float32, n*n)
			for i := range a {
				a[i], bm[i] = r.Float32(), r.Float32()
			}
			product := prepare(n, a, bm, c)
			for b.Loop() {
				product()
			}
			b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkSgemm measures the built-in GEMM (Builtin().Name() names the micro-kernel).
func BenchmarkSgemm(b *testing.B) {
	b.Logf("GEMM %s", cpu.Builtin().Name())
	benchSquare(b, func(n int, a, bm, c []float32) func() {
		return func() { cpu.Sgemm(false, false, n, n, n, 1, a, n, bm, n, 0, c, n) }
	})
}

// BenchmarkSgemmGonum measures gonum's blas32 on the same products.
func BenchmarkSgemmGonum(b *testing.B) {
	benchSquare(b, func(n int, a, bm, c []float32) func() {
		g := func(s []float32) blas32.General { return blas32.General{Rows: n, Cols: n, Stride: n, Data: s} }
		return func() { blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, g(a), g(bm), 0, g(c)) }
	})
}

// systemBLAS loads the system BLAS that SUBLET_BLAS names (default: openblas); ok is
// false when there is none to load.
func systemBLAS(b *testing.B) (lib cpu.Gemm, ok bool) {
	choice := os.Getenv(sysblas.Env)
	if choice == "" || choice == "auto" || choice == "builtin" {
		choice = "openblas"
	}
	lib, err := sysblas.Load(choice)
	if errors.Is(err, sysblas.ErrNotFound) {
		b.Log(err)
		return nil, false
	}
	if err != nil {
		b.Fatal(err)
	}
	return lib, true
}

// BenchmarkSgemmSystemBLAS measures the system BLAS that SUBLET_BLAS names (default:
// openblas), and skips when none can be loaded.
func BenchmarkSgemmSystemBLAS(b *testing.B) {
	lib, ok := systemBLAS(b)
	if !ok {
		b.Skip("no system BLAS")
	}
	b.Logf("GEMM %s", lib.Name())
	benchSquare(b, func(n int, a, bm, c []float32) func() {
		return func() { lib.Sgemm(false, false, n, n, n, 1, a, n, bm, n, 0, c, n) }
	})
}

// BenchmarkSgemmTransposes measures op(A)·op(B) for n×n matrices in every transpose
// combination (nn, nt, tn, tt) on the built-in GEMM and, in the same run, on the
// system BLAS that SUBLET_BLAS names where it loads (default: openblas): the table of
// issue 19 at 16 threads (-cpu 16) and at 2. Names are GEMM/transposes/n.
func BenchmarkSgemmTransposes(b *testing.B) {
	gemms := []cpu.Gemm{cpu.Builtin()}
	if lib, ok := systemBLAS(b); ok {
		gemms = append(gemms, lib)
	}
	for _, g := range gemms {
		name := filepath.Base(g.Name()) // a library's file, without its folder
		for _, t := range []struct {
			name   string
			ta, tb bool
		}{{"nn", false, false}, {"nt", false, true}, {"tn", true, false}, {"tt", true, true}} {
			b.Run(name+"/"+t.name, func(b *testing.B) {
				benchSquare(b, func(n int, a, bm, c []float32) func() {
					return func() { g.Sgemm(t.ta, t.tb, n, n, n, 1, a, n, bm, n, 0, c, n) }
				})
			})
		}
	}
}

// coldSets is how many operand sets BenchmarkSgemmCold rotates through: 48 of the deep
// layer's three 4 MiB matrices are 576 MiB, past the 300 MiB L3 of the 16-core host.
const coldSets = 48

// BenchmarkSgemmCold measures the deep training case's products (1024 wide, batch 1024:
// fwd x·Wᵀ, dx g·W, dw gᵀ·x) with their operands coming from memory, as in a training
// step, where each layer's product finds its activations and weights evicted by the
// other layers': each product runs on the next of coldSets operand sets. It runs the
// built-in GEMM and the system BLAS that SUBLET_BLAS names where it loads (default:
// openblas), so that the two can be set against each other, and against
// BenchmarkSgemmTraining's products on cached operands, in one run. Names are
// GEMM/product; cpu-ns/op is the process's CPU time per product.
func BenchmarkSgemmCold(b *testing.B) {
	const n = 1024
	gemms := []cpu.Gemm{cpu.Builtin()}
	if lib, ok := systemBLAS(b); ok {
		gemms = append(gemms, lib)
	}
	type set struct{ a, bm, c []float32 }
	var sets []set
	for _, g := range gemms {
		for _, p := range []struct {
			name           string
			transA, transB bool
		}{{"fwd", false, true}, {"dx", false, false}, {"dw", true, false}} {
			b.Run(filepath.Base(g.Name())+"/"+p.name, func(b *testing.B) {
				if sets == nil {
					r := rand.New(rand.NewPCG(5, 6))
					sets = make([]set, coldSets)
					for i := range sets {
						sets[i] = set{make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)}
						for j := range sets[i].a {
							sets[i].a[j], sets[i].bm[j] = r.Float32(), r.Float32()
						}
					}
				}
				i := 0
				cpu.ReportCPU(b, func() {
					s := sets[i%len(sets)]
					i++
					g.Sgemm(p.transA, p.transB, n, n, n, 1, s.a, n, s.bm, n, 0, s.c, n)
				})
				b.ReportMetric(2*n*n*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkMatmulF16 measures Matmul on float16 operands and output (converted while
// packing, accumulated in float32).
func BenchmarkMatmulF16(b *testing.B) {
	benchSquare(b, func(n int, a, bm, c []float32) func() {
		var h [3][]uint16
		for i, s := range [][]float32{a, bm, c} {
			h[i] = make([]uint16, len(s))
			dtype.F32sToF16s(h[i], s)
		}
		l := kernels.Contiguous(n, n)
		return func() { cpu.Matmul(nil, cpu.F16(h[2], l), cpu.F16(h[0], l), cpu.F16(h[1], l), 1, 0) }
	})
}

// BenchmarkMatmulF64 measures Matmul on float64 operands and output: gonum's Dgemm on
// the operands as they are.
func BenchmarkMatmulF64(b *testing.B) {
	benchSquare(b, func(n int, a, bm, c []float32) func() {
		var w [3][]float64
		for i, s := range [][]float32{a, bm, c} {
			w[i] = make([]float64, len(s))
			for j, v := range s {
				w[i][j] = float64(v)
			}
		}
		l := kernels.Contiguous(n, n)
		return func() { cpu.Matmul(nil, cpu.F64(w[2], l), cpu.F64(w[0], l), cpu.F64(w[1], l), 1, 0) }
	})
}

// BenchmarkSgemmTraining measures the products of the training cases of issue 10
// (sublet-bench -run train): a Linear layer's forward x·Wᵀ (fwd), its input gradient
// g·W (dx) and its weight gradient gᵀ·x (dw), for the tiny MLP (batch 64) and the deep
// one (1024 wide, batch 1024). Its cpu-ns/op metric is the process's CPU time per
// product.
func BenchmarkSgemmTraining(b *testing.B) {
	for _, p := range []struct {
		name           string
		transA, transB bool
		m, n, k        int
	}{
		{"tiny-fwd-784", false, true, 64, 256, 784},
		{"tiny-fwd-256", false, true, 64, 256, 256},
		{"tiny-dx-256", false, false, 64, 256, 256},
		{"tiny-dw-784", true, false, 256, 784, 64},
		{"deep-fwd", false, true, 1024, 1024, 1024},
		{"deep-dx", false, false, 1024, 1024, 1024},
		{"deep-dw", true, false, 1024, 1024, 1024},
	} {
		b.Run(p.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(3, 4))
			a, bm, c := make([]float32, p.m*p.k), make([]float32, p.k*p.n), make([]float32, p.m*p.n)
			for i := range a {
				a[i] = r.Float32()
			}
			for i := range bm {
				bm[i] = r.Float32()
			}
			lda, ldb := p.k, p.n
			if p.transA {
				lda = p.m
			}
			if p.transB {
				ldb = p.k
			}
			cpu.ReportCPU(b, func() { cpu.Sgemm(p.transA, p.transB, p.m, p.n, p.k, 1, a, lda, bm, ldb, 0, c, p.n) })
			b.ReportMetric(2*float64(p.m*p.n*p.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
