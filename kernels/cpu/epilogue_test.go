package cpu

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// f32Operand is an F32 kernels.Operand over v with layout l.
func f32Operand(v []float32, l kernels.Layout) kernels.Operand {
	b := unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
	return kernels.Operand{Layout: l, DType: dtype.F32, Mem: kernels.Mem{Host: b, Size: int64(len(b))}}
}

// TestMatmulEpilogueBits: MatmulBias and MatmulActivation give, bit for bit, what
// Matmul followed by Binary's Add of the bias and Unary's Relu give, a Linear's product
// (x [m, k] times a weight [n, k] read transposed), on the grid of tasks (several kc
// slices and nc blocks, on a small blocking), on the path of few rows (runColumns),
// on one worker and many, into a row-major output and a transposed one (the blocks
// path), with NaNs in x, which the ReLU keeps.
func TestMatmulEpilogueBits(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	defer func(g int) { gemmGrain = g }(gemmGrain)
	gemmGrain = 1 << 10
	r := rand.New(rand.NewPCG(7, 8))
	for _, kern := range gemmKernels() {
		small := newGemmKernel(kern.name, kern.mr, kern.nr, 48, 2*kern.mr, 5*kern.nr, kern.micro, kern.store)
		be := NewBackend(small)
		for _, sz := range [][3]int{{18*kern.mr - 2, 157, 10*kern.nr + 3}, {5, 157, 10*kern.nr + 3}, {1, 3, 7}, {9, 1, 33}} {
			m, k, n := sz[0], sz[1], sz[2]
			x, w, bias := make([]float32, m*k), make([]float32, n*k), make([]float32, n)
			for _, s := range [][]float32{x, w, bias} {
				for i := range s {
					s[i] = float32(r.NormFloat64())
				}
			}
			x[len(x)/2] = float32(math.NaN())
			xo := f32Operand(x, kernels.Contiguous(m, k))
			wt := f32Operand(w, kernels.Layout{Shape: []int{k, n}, Strides: []int{1, k}})
			bo := f32Operand(bias, kernels.Contiguous(n))
			layouts := map[string]kernels.Layout{"row-major": kernels.Contiguous(m, n), "transposed": {Shape: []int{m, n}, Strides: []int{1, m}}}
			for name, l := range layouts {
				for _, withBias := range []bool{true, false} {
					for _, relu := range []bool{true, false} {
						if !withBias && !relu {
							continue
						}
						want := make([]float32, m*n)
						wo := f32Operand(want, l)
						be.Matmul(wo, xo, wt)
						b := kernels.Operand{}
						if withBias {
							b = bo
							be.Binary(kernels.Add, wo, wo, bo)
						}
						if relu {
							be.Unary(kernels.Relu, wo, wo)
						}
						for _, procs := range []int{1, 16, 3} {
							runtime.GOMAXPROCS(procs)
							got := make([]float32, m*n)
							for i := range got {
								got[i] = float32(math.Inf(1)) // the product must set every element
							}
							g := f32Operand(got, l)
							var folded bool
							if relu {
								folded = be.MatmulActivation(kernels.Relu, g, xo, wt, b)
							} else {
								folded = be.MatmulBias(g, xo, wt, b)
							}
							require.True(t, folded, "%s %v %s", kern.name, sz, name)
							for i := range got {
								if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
									t.Fatalf("%s m=%d k=%d n=%d %s bias %v relu %v, %d workers: %v at %d, the three ops %v",
										kern.name, m, k, n, name, withBias, relu, procs, got[i], i, want[i])
								}
							}
						}
					}
				}
			}
		}
	}
}

// The epilogue declines what it cannot fold: float64, another activation, a system
// BLAS, an empty k; the caller then runs the ops.
func TestMatmulEpilogueDeclines(t *testing.T) {
	x, w, d := make([]float32, 6), make([]float32, 6), make([]float32, 4)
	xo, wo, do := f32Operand(x, kernels.Contiguous(2, 3)), f32Operand(w, kernels.Contiguous(3, 2)), f32Operand(d, kernels.Contiguous(2, 2))
	be := NewBackend(nil)
	require.False(t, be.MatmulActivation(kernels.GeluTanh, do, xo, wo, kernels.Operand{}))
	x64 := make([]float64, 4)
	require.False(t, be.MatmulBias(f64Operand(x64), xo, wo, f32Operand(d[:2], kernels.Contiguous(2))))
	empty := f32Operand(x, kernels.Contiguous(2, 0))
	require.False(t, be.MatmulBias(do, empty, f32Operand(w, kernels.Contiguous(0, 2)), f32Operand(d[:2], kernels.Contiguous(2))))
	require.False(t, NewBackend(sysStandIn{}).MatmulBias(do, xo, wo, f32Operand(d[:2], kernels.Contiguous(2))))
}

// sysStandIn stands in for a system BLAS (SUBLET_BLAS) in TestMatmulEpilogueDeclines.
type sysStandIn struct{ Gemm }

// BenchmarkLinearEpilogue times a Linear's product with its bias and ReLU, [1024,
// 1024] by a [1024, 1024] weight read transposed, as three ops (Matmul, Binary's Add,
// Unary's Relu) and as one (MatmulActivation: the two in the GEMM's epilogue).
func BenchmarkLinearEpilogue(b *testing.B) {
	const m, k, n = 1024, 1024, 1024
	x, w, bias, out := benchData(m*k), benchData(n*k), benchData(n), make([]float32, m*n)
	xo, wt := f32Operand(x, kernels.Contiguous(m, k)), f32Operand(w, kernels.Layout{Shape: []int{k, n}, Strides: []int{1, k}})
	bo, do := f32Operand(bias, kernels.Contiguous(n)), f32Operand(out, kernels.Contiguous(m, n))
	be := NewBackend(nil)
	b.Run("ops", func(b *testing.B) {
		for b.Loop() {
			be.Matmul(do, xo, wt)
			be.Binary(kernels.Add, do, do, bo)
			be.Unary(kernels.Relu, do, do)
		}
		b.ReportMetric(2*m*n*k/b.Elapsed().Seconds()*float64(b.N)/1e9, "GFLOP/s")
	})
	b.Run("folded", func(b *testing.B) {
		for b.Loop() {
			be.MatmulActivation(kernels.Relu, do, xo, wt, bo)
		}
		b.ReportMetric(2*m*n*k/b.Elapsed().Seconds()*float64(b.N)/1e9, "GFLOP/s")
	})
}
