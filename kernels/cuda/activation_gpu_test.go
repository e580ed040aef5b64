package cuda_test

// Tests of MatmulActivation (cuBLASLt's RELU and RELU_BIAS epilogues) on the GPU: they
// skip where there is no CUDA driver or GPU.

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/cuda"
)

// linearOperands makes a Linear's operands on the GPU, as package tensor hands them to
// the kernels: x [rows, in], the weight [out, in] read transposed, the bias [out], each
// value sin-spread in about [-1, 1]; and results (new, zeroed, per call).
type linearOperands struct {
	t             testing.TB
	mem           gpuMemory
	b             *cuda.Backend
	dt            dtype.DType
	live          []kernels.Operand // freed by free
	x, wt, bias   kernels.Operand
	rows, in, out int
}

func newLinearOperands(t testing.TB, mem gpuMemory, b *cuda.Backend, dt dtype.DType, rows, in, out int) *linearOperands {
	l := &linearOperands{t: t, mem: mem, b: b, dt: dt, rows: rows, in: in, out: out}
	l.x = l.upload([]int{rows, in}, 1)
	w := l.upload([]int{out, in}, 2)
	w.Layout = kernels.Layout{Shape: []int{in, out}, Strides: []int{1, in}}
	l.wt = w
	l.bias = l.upload([]int{out}, 3)
	return l
}

// upload puts values of shape, fixed by seed and scaled so that products of in terms
// stay about 1, on the GPU: written as float32 and converted there by Copy.
func (l *linearOperands) upload(shape []int, seed int) kernels.Operand {
	lay := kernels.Contiguous(shape...)
	raw := make([]byte, 4*lay.Size())
	scale := 1.0
	if len(shape) == 2 {
		scale = 2 / math.Sqrt(float64(l.in))
	}
	for i := range lay.Size() {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(math.Sin(float64(i*7+seed*13))*scale)))
	}
	f32 := kernels.Operand{Layout: lay, DType: dtype.F32, Mem: l.mem.Alloc(l.t, int64(len(raw)))}
	defer l.mem.Free(l.t, f32.Mem)
	l.mem.Write(l.t, f32.Mem, raw)
	o := l.result(shape...)
	l.b.Copy(o, f32)
	return o
}

// result returns a new zeroed operand of shape.
func (l *linearOperands) result(shape ...int) kernels.Operand {
	lay := kernels.Contiguous(shape...)
	o := kernels.Operand{Layout: lay, DType: l.dt, Mem: l.mem.Alloc(l.t, int64(lay.Size()*l.dt.Size()))}
	l.b.Fill(o, 0)
	l.live = append(l.live, o)
	return o
}

// read returns o's values, converted to float32 on the GPU by Copy.
func (l *linearOperands) read(o kernels.Operand) []float64 {
	f32 := kernels.Operand{Layout: o.Layout, DType: dtype.F32, Mem: l.mem.Alloc(l.t, int64(4*o.Layout.Size()))}
	defer l.mem.Free(l.t, f32.Mem)
	l.b.Copy(f32, o)
	raw := l.mem.Read(l.t, f32.Mem)
	v := make([]float64, o.Layout.Size())
	for i := range v {
		v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
	}
	return v
}

func (l *linearOperands) free() {
	for _, o := range l.live {
		l.mem.Free(l.t, o.Mem)
	}
}

// unfused runs what package tensor runs without the epilogue: the product with its
// bias (folded by MatmulBias where it can) into dst, then ReLU's kernel in place.
func unfused(b *cuda.Backend, dst, x, wt, bias kernels.Operand) {
	if bias.Absent() || !b.MatmulBias(dst, x, wt, bias) {
		b.Matmul(dst, x, wt)
		if !bias.Absent() {
			b.Binary(kernels.Add, dst, dst, bias)
		}
	}
	b.Unary(kernels.Relu, dst, dst)
}

// TestMatmulActivationMatchesUnfused: a Linear's product with its ReLU in cuBLASLt's
// epilogue, with and without a bias, in F32, F16 and BF16, is folded (one launch) and
// gives the unfused kernels' values within the products' own differences.
func TestMatmulActivationMatchesUnfused(t *testing.T) {
	dev, al, b := gpuBLAS(t)
	mem := gpuMemory{dev, al}
	const rows, in, out = 96, 256, 128
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		l := newLinearOperands(t, mem, b, dt, rows, in, out)
		tol := map[dtype.DType]float64{dtype.F32: 1e-5, dtype.F16: 4e-3, dtype.BF16: 3e-2}[dt]
		for _, withBias := range []bool{true, false} {
			name := fmt.Sprintf("%v bias %v", dt, withBias)
			bias := kernels.Operand{}
			if withBias {
				bias = l.bias
			}
			want := l.result(l.rows, l.out)
			unfused(b, want, l.x, l.wt, bias)
			got := l.result(l.rows, l.out)
			before := cuda.Launches(dev)
			require.True(t, b.MatmulActivation(kernels.Relu, got, l.x, l.wt, bias), "%s: declined", name)
			require.Equal(t, int64(1), cuda.Launches(dev)-before, "%s: one launch", name)
			require.NoError(t, b.Check())
			requireNear(t, name, l.read(want), l.read(got), tol)
		}
		l.free()
	}
}

// TestMatmulActivationDeclines: float64 and any activation but ReLU (GELU's tanh form,
// whose epilogue measured slower, and tanh, which has none) are declined with nothing
// written; the unfused kernels then run, as package tensor runs them.
func TestMatmulActivationDeclines(t *testing.T) {
	dev, al, b := gpuBLAS(t)
	mem := gpuMemory{dev, al}
	l := newLinearOperands(t, mem, b, dtype.F32, 16, 32, 16)
	got := l.result(l.rows, l.out)
	require.False(t, b.MatmulActivation(kernels.GeluTanh, got, l.x, l.wt, l.bias), "GELU (tanh)")
	require.False(t, b.MatmulActivation(kernels.Tanh, got, l.x, l.wt, l.bias), "tanh")
	require.Equal(t, make([]float64, 16*16), l.read(got), "nothing written")
	l.free()
	l64 := kernels.Operand{Layout: kernels.Contiguous(4, 4), DType: dtype.F64, Mem: mem.Alloc(t, 128)}
	require.False(t, b.MatmulActivation(kernels.Relu, l64, l64, l64, kernels.Operand{}), "float64")
	mem.Free(t, l64.Mem)
	require.NoError(t, b.Check())
}

// TestMatmulActivationNaN: a row of x holding a NaN makes its row of the product NaN;
// ReLU gives NaN or 0 (kernels.ActivationMatmul allows either; the log says which
// cuBLASLt gives), every other row no NaN.
func TestMatmulActivationNaN(t *testing.T) {
	dev, al, b := gpuBLAS(t)
	mem := gpuMemory{dev, al}
	const rows, in, out = 16, 32, 16
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		l := newLinearOperands(t, mem, b, dt, rows, in, out)
		nan := l.result(1)
		b.Fill(nan, math.NaN())
		x35 := l.x
		x35.Layout = kernels.Contiguous(1)
		x35.Offset = 3*in + 5
		b.Copy(x35, nan)
		got := l.result(rows, out)
		require.True(t, b.MatmulActivation(kernels.Relu, got, l.x, l.wt, l.bias))
		nans, zeros := 0, 0
		for i, y := range l.read(got) {
			switch {
			case i/out != 3:
				require.False(t, math.IsNaN(y), "%v: element %d", dt, i)
			case math.IsNaN(y):
				nans++
			case y == 0:
				zeros++
			default:
				require.Failf(t, "a NaN row", "%v: element %d is %v", dt, i, y)
			}
		}
		t.Logf("%v: the NaN row gives %d NaN and %d zeros", dt, nans, zeros)
		require.NoError(t, b.Check())
		l.free()
	}
}

// requireNear asserts |want−got| ≤ tol·max(1, |want|) element by element, and logs the
// largest difference, which the GPU run's log keeps.
func requireNear(t *testing.T, what string, want, got []float64, tol float64) {
	t.Helper()
	require.Len(t, got, len(want), what)
	worst, at := 0.0, 0
	for i := range want {
		if d := math.Abs(want[i]-got[i]) / max(1, math.Abs(want[i])); d > worst {
			worst, at = d, i
		}
	}
	t.Logf("%s: largest difference %.3g (element %d: want %v, got %v)", what, worst, at, want[at], got[at])
	require.LessOrEqual(t, worst, tol, "%s: element %d: want %v, got %v", what, at, want[at], got[at])
}

// BenchmarkLinearActivation times a wide layer's forward, [4096, 4096]·[4096, 4096]ᵀ +
// bias and its ReLU, fused (one cublasLtMatmul with the epilogue) and unfused (the
// product with its bias, then ReLU's kernel), b.N calls then one wait, in GFLOP/s of
// the product. (GELU's epilogue, measured the same way, was slower than the product
// followed by the gelu-tanh kernel, and is not used: MatmulActivation's comment.)
func BenchmarkLinearActivation(bm *testing.B) {
	dev, al, b := gpuBLAS(bm)
	mem := gpuMemory{dev, al}
	const n = 4096
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		l := newLinearOperands(bm, mem, b, dt, n, n, n)
		y := l.result(l.rows, l.out)
		cases := []struct {
			name string
			f    func()
		}{
			{"fused", func() {
				if !b.MatmulActivation(kernels.Relu, y, l.x, l.wt, l.bias) {
					bm.Fatal("declined")
				}
			}},
			{"unfused", func() { unfused(b, y, l.x, l.wt, l.bias) }},
		}
		for _, c := range cases {
			bm.Run(fmt.Sprintf("%v/relu/%s", dt, c.name), func(bm *testing.B) {
				took := timeOnDevice(bm, dev, c.f)
				bm.ReportMetric(2*float64(n)*n*n*float64(bm.N)/float64(took.Nanoseconds()), "GFLOP/s")
			})
		}
		require.NoError(bm, b.Check())
		l.free()
	}
}
