package cuda_test

// Tests on the GPU: they skip where there is no CUDA driver or GPU.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/device/named"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/cuda"
	"github.com/subletml/sublet/kernels/kernelstest"
	"github.com/subletml/sublet/tensor"
)

// gpu returns cuda:0 (named, so the process shares one Device and allocator with
// every other package's tests), its allocator and its backend, or skips. The test
// must leave the allocator as it found it: empty, but for the backend's own memory,
// which a cleanup gives back.
func gpu(t testing.TB) (*cudadev.Device, *alloc.Allocator, *cuda.Backend) {
	t.Helper()
	d, err := named.Open("cuda:0")
	if errors.Is(err, cudadev.ErrNoDriver) || errors.Is(err, cudadev.ErrNoDevice) {
		t.Skip(err)
	}
	require.NoError(t, err)
	dev := d.(*cudadev.Device)
	al, err := alloc.For(dev)
	require.NoError(t, err)
	b, err := cuda.For(dev)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, b.Release())
		require.Zero(t, al.Stats().RequestedBytes[alloc.StatAll].Current, "memory left allocated")
		require.NoError(t, al.EmptyCache())
	})
	return dev, al, b
}

// gpuBLAS is gpu for a test of the products: it skips where cuBLAS cannot be loaded.
func gpuBLAS(t testing.TB) (*cudadev.Device, *alloc.Allocator, *cuda.Backend) {
	t.Helper()
	dev, al, b := gpu(t)
	if _, err := cuda.BLAS(); err != nil {
		t.Skip(err)
	}
	return dev, al, b
}

// gpuMemory is kernelstest.Memory on the GPU: blocks from the caching allocator,
// copies through the driver (CopyToHost waits for the stream).
type gpuMemory struct {
	dev *cudadev.Device
	al  *alloc.Allocator
}

func (m gpuMemory) Alloc(t testing.TB, n int64) kernels.Mem {
	p, err := m.al.Alloc(n, 0)
	require.NoError(t, err)
	return kernels.Mem{Ptr: p, Size: n}
}

func (m gpuMemory) Write(t testing.TB, mem kernels.Mem, b []byte) {
	require.NoError(t, m.dev.CopyToDevice(mem.Ptr, b, 0))
}

func (m gpuMemory) Read(t testing.TB, mem kernels.Mem) []byte {
	b := make([]byte, mem.Size)
	require.NoError(t, m.dev.CopyToHost(b, mem.Ptr, 0))
	return b
}

func (m gpuMemory) Free(t testing.TB, mem kernels.Mem) { require.NoError(t, m.al.Free(mem.Ptr)) }

// TestConformance runs the backend conformance suite on cuda:0: every method, every
// float type, strided, broadcast and empty operands, against the float64 references
// and kernels/cpu; index errors arrive at Check.
func TestConformance(t *testing.T) {
	dev, al, b := gpu(t)
	kernelstest.Run(t, kernelstest.Target{Backend: b, Memory: gpuMemory{dev, al}})
	require.NoError(t, b.Check())
}

// TestKernelsLoadWithoutSpills loads every family from its fatbin and checks each
// kernel: SASS for this GPU (no JIT) on sm_80 and sm_90, no local memory, and room for
// the 256-thread blocks it is launched with.
func TestKernelsLoadWithoutSpills(t *testing.T) {
	dev, _, b := gpu(t)
	attrs, err := b.KernelAttributes()
	require.NoError(t, err)
	p := dev.Properties()
	sm := 10*p.ComputeMajor + p.ComputeMinor
	for name, a := range attrs {
		assert.Zero(t, a.LocalBytes, "%s spills", name)
		assert.GreaterOrEqual(t, a.MaxThreadsPerBlock, 256, name)
		if sm == 80 || sm == 90 {
			assert.Equal(t, sm, a.BinaryVersion, "%s: SASS for sm_%d", name, sm)
		}
	}
	t.Logf("%d kernels on sm_%d", len(attrs), sm)
}

// TestWorkspaceInAllocatorStats: the first product takes a cuBLAS workspace of
// PyTorch's size from the caching allocator; Held names it; Release gives it back.
func TestWorkspaceInAllocatorStats(t *testing.T) {
	dev, al, b := gpuBLAS(t)
	mem := gpuMemory{dev, al}
	op := func(shape ...int) kernels.Operand {
		l := kernels.Contiguous(shape...)
		return kernels.Operand{Layout: l, DType: dtype.F32, Mem: mem.Alloc(t, int64(4*l.Size()))}
	}
	x, w, out := op(8, 16), op(16, 4), op(8, 4)
	before := al.Stats().RequestedBytes[alloc.StatAll].Current
	b.Matmul(out, x, w)
	require.NoError(t, b.Check())
	p := dev.Properties()
	ws := cuda.WorkspaceBytes(os.Getenv(cuda.WorkspaceEnv), p.ComputeMajor, p.ComputeMinor)
	assert.Equal(t, before+ws, al.Stats().RequestedBytes[alloc.StatAll].Current)
	var named int64
	for _, h := range b.Held() {
		if h.Allocator {
			named += h.Bytes
		}
	}
	assert.Equal(t, ws, named)
	for _, o := range []kernels.Operand{x, w, out} {
		mem.Free(t, o.Mem)
	}
	require.NoError(t, b.Release())
	assert.Zero(t, al.Stats().RequestedBytes[alloc.StatAll].Current)
}

// TestLaunchAllocatesNothing: an op's host side makes no heap allocation.
func TestLaunchAllocatesNothing(t *testing.T) {
	dev, al, b := gpu(t)
	mem := gpuMemory{dev, al}
	l := kernels.Contiguous(32, 32)
	x := kernels.Operand{Layout: l, DType: dtype.F32, Mem: mem.Alloc(t, 4096)}
	defer mem.Free(t, x.Mem)
	b.Binary(kernels.Add, x, x, x) // loads the family
	allocs := testing.AllocsPerRun(200, func() { b.Binary(kernels.Add, x, x, kernels.Scalar(1)) })
	require.NoError(t, b.Check())
	assert.Zero(t, allocs)
	// A launch with the error flag, and one of five operands.
	b.Fill(x, 0.5)
	require.NoError(t, b.BinaryCrossEntropy(x, x, x)) // takes the flag
	allocs = testing.AllocsPerRun(200, func() {
		b.Fill(x, 0.5)
		_ = b.BinaryCrossEntropy(x, x, kernels.Scalar(0.25))
		b.BinaryCrossEntropyWithLogitsBackward(kernels.ArgA, x, x, x, x, kernels.Operand{})
	})
	require.NoError(t, b.Check())
	assert.Zero(t, allocs)
	// The multi-tensor steps, their tables on the stack.
	ps, first, steps := []kernels.Operand{x, x, x}, []bool{true, false, false}, []int{1, 2, 3}
	found := kernels.Operand{Layout: kernels.Contiguous(), DType: dtype.F32, Mem: x.Mem}
	allocs = testing.AllocsPerRun(200, func() {
		b.SGDMulti(kernels.SGD{LR: 0.1, Momentum: 0.9}, ps, ps, ps, first)
		b.AdamMulti(kernels.Adam{LR: 0.1, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8}, steps, ps, ps, ps, ps)
		b.UnscaleMulti(ps, 0.5, found)
	})
	require.NoError(t, b.Check())
	assert.Zero(t, allocs)
}

// BenchmarkOpHostCost measures what an op costs the host (checks, the walk, the
// launch) on small tensors, where the GPU's work is negligible: the per-op floor.
func BenchmarkOpHostCost(bm *testing.B) {
	dev, al, b := gpu(bm)
	mem := gpuMemory{dev, al}
	op := func(shape ...int) kernels.Operand {
		l := kernels.Contiguous(shape...)
		return kernels.Operand{Layout: l, DType: dtype.F32, Mem: mem.Alloc(bm, int64(4*max(l.Size(), 1)))}
	}
	x, y, out, sum := op(64, 64), op(64, 64), op(64, 64), op(1, 64)
	defer func() {
		for _, o := range []kernels.Operand{x, y, out, sum} {
			mem.Free(bm, o.Mem)
		}
	}()
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"Add", func() { b.Binary(kernels.Add, out, x, y) }},
		{"AddScalar", func() { b.Binary(kernels.Add, out, x, kernels.Scalar(2)) }},
		{"Relu", func() { b.Unary(kernels.Relu, out, x) }},
		{"Copy", func() { b.Copy(out, x) }},
		{"Sum", func() { b.Sum(sum, x) }},
		{"Softmax", func() { b.Softmax(out, x, 64, 64, 1) }},
		{"Matmul", func() { b.Matmul(out, x, y) }},
	} {
		bm.Run(c.name, func(bm *testing.B) {
			c.f()
			bm.ReportAllocs()
			for bm.Loop() {
				c.f()
			}
			require.NoError(bm, b.Synchronize())
		})
	}
}

// TestTensorErrorsAtSynchronisation: through the tensor API on cuda:0, a label out of
// range does not stop CrossEntropy (the op returns at once), and the next point that
// reads values back reports it as a typed error naming the op; an index out of a table
// the same, through tensor.Synchronize; nothing stays allocated.
func TestTensorErrorsAtSynchronisation(t *testing.T) {
	dev, al, _ := gpu(t)
	s := tensor.NewScope()
	logits := tensor.FromSlice(s, dev, dtype.F32, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	labels := tensor.FromSlice(s, dev, dtype.I64, []int64{0, 3})
	loss := tensor.CrossEntropy(logits, labels)
	err := tensor.Try(func() { loss.Item() })
	var ie *kernels.IndexError
	require.True(t, errors.As(err, &ie), "got %v", err)
	assert.Equal(t, kernels.IndexError{Op: "cross_entropy", Pos: 1, Index: 3, Limit: 3}, *ie)
	assert.ErrorIs(t, err, tensor.ErrIndex)
	var te *tensor.Error
	require.True(t, errors.As(err, &te))
	assert.Equal(t, "Item", te.Op)
	require.NoError(t, tensor.Synchronize(dev), "reported once")

	table := tensor.FromSlice(s, dev, dtype.F32, []float32{1, 2, 3, 4}, 2, 2)
	tensor.Embedding(table, tensor.FromSlice(s, dev, dtype.I64, []int64{1, -1, 0}))
	err = tensor.Synchronize(dev)
	require.True(t, errors.As(err, &ie), "got %v", err)
	assert.Equal(t, kernels.IndexError{Op: "embedding", Pos: 1, Index: -1, Limit: 2}, *ie)
	s.Close()
	assert.Equal(t, tensor.BackendHeld(dev), al.Stats().RequestedBytes[alloc.StatAll].Current, "nothing but the kernels' own memory")
}

// TestTensorRangeErrorAtSynchronisation: BinaryCrossEntropy of probabilities outside
// [0, 1] on cuda:0 returns its loss at once; the next read reports the
// *kernels.RangeError kernels/cpu returns from the op itself (the op, the count of bad
// elements, [0, 1]), matching the same error sentinels as the CPU's error, once.
func TestTensorRangeErrorAtSynchronisation(t *testing.T) {
	dev, al, _ := gpu(t)
	cpuDev, err := named.Open("cpu")
	require.NoError(t, err)
	s := tensor.NewScope()
	vals := []float32{0.5, 1.5, -1, float32(math.NaN()), 0, 1}
	x := tensor.FromSlice(s, dev, dtype.F32, vals, 2, 3)
	y := s.Zeros(dev, dtype.F32, 2, 3)
	loss := tensor.BinaryCrossEntropy(x, y, tensor.BCEOptions{})
	gpuErr := tensor.Try(func() { loss.Item() })
	var re *kernels.RangeError
	require.True(t, errors.As(gpuErr, &re), "got %v", gpuErr)
	assert.Equal(t, kernels.RangeError{Op: "binary_cross_entropy", Count: 3, Lo: 0, Hi: 1}, *re)
	assert.Contains(t, gpuErr.Error(), "between 0 and 1")
	var te *tensor.Error
	require.True(t, errors.As(gpuErr, &te))
	assert.Equal(t, "Item", te.Op)
	require.NoError(t, tensor.Synchronize(dev), "reported once")

	cpuErr := tensor.Try(func() {
		tensor.BinaryCrossEntropy(tensor.FromSlice(s, cpuDev, dtype.F32, vals, 2, 3), s.Zeros(cpuDev, dtype.F32, 2, 3), tensor.BCEOptions{})
	})
	var cre *kernels.RangeError
	require.True(t, errors.As(cpuErr, &cre), "got %v", cpuErr)
	assert.Equal(t, *cre, *re, "the CPU's error")
	for _, sentinel := range []error{tensor.ErrShape, tensor.ErrDType, tensor.ErrDevice, tensor.ErrGrad, tensor.ErrNoData} {
		assert.Equal(t, errors.Is(cpuErr, sentinel), errors.Is(gpuErr, sentinel), "matches %v as the CPU's error does", sentinel)
	}

	// The logits form and Addc have no data-dependent errors.
	lx := tensor.FromSlice(s, dev, dtype.F32, []float32{-100, 0, 100}, 3)
	ly := tensor.FromSlice(s, dev, dtype.F32, []float32{1, 0.5, 0}, 3)
	got := tensor.ToSlice[float32](tensor.BinaryCrossEntropyWithLogits(lx, ly, tensor.BCEOptions{Reduction: tensor.ReduceNone}))
	assert.InDeltaSlice(t, []float64{100, math.Ln2, 100}, []float64{float64(got[0]), float64(got[1]), float64(got[2])}, 1e-5)
	assert.Equal(t, []float32{-199, 0.5, 0}, tensor.ToSlice[float32](ly.Addcmul(lx, ly, 2)))
	s.Close()
	assert.Equal(t, tensor.BackendHeld(dev), al.Stats().RequestedBytes[alloc.StatAll].Current, "nothing but the kernels' own memory")
}

// TestTensorFloat64MatchesCPU: an F64 forward and backward through the tensor API on
// cuda:0 (a product on cuBLAS in CUBLAS_COMPUTE_64F, softmax, elementwise ops with a
// number no float32 holds, a sum) gives the CPU's loss and gradient to float64's
// precision, far closer than a float32 rounding anywhere would; nothing stays
// allocated.
func TestTensorFloat64MatchesCPU(t *testing.T) {
	dev, al, _ := gpu(t)
	cpuDev, err := named.Open("cpu")
	require.NoError(t, err)
	run := func(d device.Device) (loss float64, grad []float64) {
		s := tensor.NewScope()
		defer s.Close()
		xs, ws, cs := make([]float64, 6*5), make([]float64, 5*4), make([]float64, 4)
		for i := range xs {
			xs[i] = math.Sin(float64(i)) / 3
		}
		for i := range ws {
			ws[i] = math.Cos(float64(i)) * 3
		}
		for i := range cs {
			cs[i] = float64(i) - 1.5
		}
		x := tensor.FromSlice(s, d, dtype.F64, xs, 6, 5).SetRequiresGrad(true)
		w := tensor.FromSlice(s, d, dtype.F64, ws, 5, 4)
		c := tensor.FromSlice(s, d, dtype.F64, cs, 4)
		y := x.MatMul(w).MulScalar(0.1).Exp().Softmax(1).Mul(c).Sum()
		y.Backward()
		return y.Item(), tensor.ToSlice[float64](x.Grad())
	}
	gl, gg := run(dev)
	cl, cg := run(cpuDev)
	assert.InDelta(t, cl, gl, 1e-14, "loss") // a float32 rounding would be 1e-9 off
	require.Len(t, gg, len(cg))
	for i := range cg {
		assert.InDelta(t, cg[i], gg[i], 1e-14, "gradient %d", i)
	}
	assert.Equal(t, tensor.BackendHeld(dev), al.Stats().RequestedBytes[alloc.StatAll].Current, "nothing but the kernels' own memory")
}

// timeOnDevice runs f once to warm up, then bm.N times with the device's wait inside
// the timing (so not bm.Loop, which stops the timer before the wait could run), and
// reports how long the bm.N runs took.
func timeOnDevice(bm *testing.B, dev *cudadev.Device, f func()) time.Duration {
	f()
	require.NoError(bm, dev.Synchronize())
	bm.ResetTimer()
	start := time.Now()
	for range bm.N {
		f()
	}
	require.NoError(bm, dev.Synchronize())
	return time.Since(start)
}

// BenchmarkKernelBandwidth times the kernels a training step spends its elementwise
// and reduction time in, on the device: each b.N launches, then one wait, so the
// figure (MB/s from SetBytes: every byte read and written once) is the kernel's, not
// the host's. The shape is a wide layer's activations: [4096, 4096] in each float
// type of a step (F32, and autocast's F16 and BF16).
func BenchmarkKernelBandwidth(bm *testing.B) {
	dev, al, b := gpu(bm)
	mem := gpuMemory{dev, al}
	const rows, cols = 4096, 4096
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		var live []kernels.Operand
		op := func(t dtype.DType, shape ...int) kernels.Operand {
			l := kernels.Contiguous(shape...)
			o := kernels.Operand{Layout: l, DType: t, Mem: mem.Alloc(bm, int64(t.Size()*max(l.Size(), 1)))}
			live = append(live, o)
			return o
		}
		x, y, out := op(dt, rows, cols), op(dt, rows, cols), op(dt, rows, cols)
		bias, colSum, rowSum, all := op(dt, cols), op(dt, 1, cols), op(dt, rows, 1), op(dt)
		rowArg := op(dtype.I64, rows, 1)
		// The row kernels over rows of 1024 (a warp a row), the same bytes; F32 only.
		const rowLen = 1024
		nrows := rows * cols / rowLen
		// The row kernels' statistics are float32 for every row type here.
		mean, rstd := op(dtype.F32, nrows, 1), op(dtype.F32, nrows, 1)
		mean4, rstd4 := op(dtype.F32, rows, 1), op(dtype.F32, rows, 1)
		other := dtype.F16
		if dt != dtype.F32 {
			other = dtype.F32
		}
		cast := op(other, rows, cols)
		lse, labels, one := op(dtype.F32, nrows+1), op(dtype.I64, nrows), op(dtype.F32)
		b.Fill(labels, 3)
		b.Fill(one, 1)
		b.Fill(x, 0.5)
		b.Fill(y, -0.25)
		b.Fill(bias, 1)
		n, es := int64(rows*cols), int64(dt.Size())
		type kernelCase struct {
			name  string
			bytes int64
			f     func()
		}
		cases := []kernelCase{
			{"Copy", 2 * n * es, func() { b.Copy(out, x) }},
			{"Cast", n * (es + int64(other.Size())), func() { b.Copy(cast, x) }},
			{"Add", 3 * n * es, func() { b.Binary(kernels.Add, out, x, y) }},
			{"AddBias", 2 * n * es, func() { b.Binary(kernels.Add, out, x, bias) }},
			{"Relu", 2 * n * es, func() { b.Unary(kernels.Relu, out, x) }},
			{"GeluTanh", 2 * n * es, func() { b.Unary(kernels.GeluTanh, out, x) }},
			{"ReluBackward", 3 * n * es, func() { b.UnaryBackward(kernels.Relu, out, x, y) }},
			{"SumCols", n * es, func() { b.Sum(colSum, x) }},
			{"SumRows", n * es, func() { b.Sum(rowSum, x) }},
			{"SumAll", n * es, func() { b.Sum(all, x) }},
			{"MaxRows", n * es, func() { b.Max(rowSum, rowArg, x) }},
		}
		cases = append(cases, // the row kernels read F32, F16 and BF16 rows as they are

			kernelCase{"SoftmaxRows1024", 2 * n * es, func() { b.Softmax(out, x, nrows, rowLen, 1) }},
			kernelCase{"SoftmaxBackwardRows1024", 3 * n * es, func() { b.SoftmaxBackward(out, x, y, nrows, rowLen, 1) }},
			kernelCase{"LayerNormRows1024", 2 * n * es, func() { b.LayerNorm(out, mean, rstd, x, kernels.Operand{}, kernels.Operand{}, nrows, rowLen, 1e-5) }},
			kernelCase{"LayerNormBackwardRows1024", 3 * n * es, func() {
				b.LayerNormBackward(out, kernels.Operand{}, kernels.Operand{}, y, x, mean, rstd, kernels.Operand{}, nrows, rowLen)
			}},
			// Rows of 4096: a block each.
			kernelCase{"SoftmaxRows4096", 2 * n * es, func() { b.Softmax(out, x, rows, cols, 1) }},
			kernelCase{"LayerNormRows4096", 2 * n * es, func() { b.LayerNorm(out, mean4, rstd4, x, kernels.Operand{}, kernels.Operand{}, rows, cols, 1e-5) }},
			kernelCase{"LayerNormBackwardRows4096", 3 * n * es, func() {
				b.LayerNormBackward(out, kernels.Operand{}, kernels.Operand{}, y, x, mean4, rstd4, kernels.Operand{}, rows, cols)
			}},
			// Cross-entropy over rows of 1024 with a label each: the forward reads the
			// logits once, the backward reads them and writes dlogits.
			kernelCase{"CrossEntropyRows1024", n * es, func() { _ = b.CrossEntropy(all, lse, x, labels, nrows, rowLen, -100) }},
			kernelCase{"CrossEntropyBackwardRows1024", 2 * n * es, func() { b.CrossEntropyBackward(out, x, lse, labels, one, nrows, rowLen, -100) }})
		for _, c := range cases {
			bm.Run(dt.String()+"/"+c.name, func(bm *testing.B) {
				bm.SetBytes(c.bytes)
				timeOnDevice(bm, dev, c.f)
			})
		}
		require.NoError(bm, b.Check())
		for _, o := range live {
			mem.Free(bm, o.Mem)
		}
	}
}

// BenchmarkProducts times products on the device as a step calls them (b.N calls, then
// one wait), with their rate in GFLOP/s: the square products of 4096 in each float
// type and transposition, which are the device's, and the tiny MLP's (784-256-256-10,
// batch 64): the forward's Linear with its bias folded (MatmulBias), the input
// gradients' plain products and the weight gradients' with the bias gradient folded
// (MatmulBiasGrad), each falling back as package tensor does where the backend
// declines. The tiny ones are too short for the host to keep the device busy (a call
// costs the host 6-12 µs): their device time is a step's, scripts/gpu/probe/tinygraph.
func BenchmarkProducts(bm *testing.B) {
	dev, al, b := gpuBLAS(bm)
	mem := gpuMemory{dev, al}
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		var live []kernels.Operand
		op := func(shape ...int) kernels.Operand {
			l := kernels.Contiguous(shape...)
			o := kernels.Operand{Layout: l, DType: dt, Mem: mem.Alloc(bm, int64(dt.Size()*l.Size()))}
			b.Fill(o, 0.01)
			live = append(live, o)
			return o
		}
		// t is o's transpose, a view.
		t := func(o kernels.Operand) kernels.Operand {
			o.Layout = kernels.Layout{Shape: []int{o.Shape[1], o.Shape[0]}, Strides: []int{1, o.Shape[1]}}
			return o
		}
		type productCase struct {
			name    string
			m, k, n int
			f       func()
		}
		const big = 4096
		a, c, sq := op(big, big), op(big, big), op(big, big)
		cases := []productCase{
			{"nn-4096", big, big, big, func() { b.Matmul(sq, a, c) }},
			{"nt-4096", big, big, big, func() { b.Matmul(sq, a, t(c)) }},
			{"tn-4096", big, big, big, func() { b.Matmul(sq, t(a), c) }},
		}
		const batch = 64
		widths := []int{784, 256, 256, 10}
		for l := range len(widths) - 1 {
			in, out := widths[l], widths[l+1]
			x, w, bias, y := op(batch, in), op(out, in), op(out), op(batch, out)
			g, dx, dw, db := op(batch, out), op(batch, in), op(out, in), op(out)
			cases = append(cases,
				productCase{fmt.Sprintf("linear-%dx%dx%d", batch, in, out), batch, in, out, func() {
					if !b.MatmulBias(y, x, t(w), bias) {
						b.Matmul(y, x, t(w))
						b.Binary(kernels.Add, y, y, bias)
					}
				}},
				productCase{fmt.Sprintf("dx-%dx%dx%d", batch, out, in), batch, out, in, func() { b.Matmul(dx, g, w) }},
				productCase{fmt.Sprintf("dw-%dx%dx%d", out, batch, in), out, batch, in, func() {
					if !b.MatmulBiasGrad(dw, db, t(g), x) {
						b.Matmul(dw, t(g), x)
						col := db
						col.Layout = kernels.Contiguous(out, 1)
						b.Sum(col, t(g))
					}
				}})
		}
		for _, pc := range cases {
			bm.Run(dt.String()+"/"+pc.name, func(bm *testing.B) {
				took := timeOnDevice(bm, dev, pc.f)
				bm.ReportMetric(2*float64(pc.m)*float64(pc.k)*float64(pc.n)*float64(bm.N)/float64(took.Nanoseconds()), "GFLOP/s")
			})
		}
		require.NoError(bm, b.Check())
		for _, o := range live {
			mem.Free(bm, o.Mem)
		}
	}
}

// TestFlagRecordClearedAfterError: the error record lives in page-locked host memory
// (Held names it beside the flag's 64-byte device block): an embedding index outside
// the table is reported at the next Check with its first position; the next Check
// after a clean flagged launch is nil (the record was cleared in place), a later bad
// index is reported again, and Release gives back the record's host memory.
func TestFlagRecordClearedAfterError(t *testing.T) {
	dev, al, b := gpu(t)
	mem := gpuMemory{dev, al}
	i64s := func(v ...int64) []byte {
		var raw []byte
		for _, x := range v {
			raw = binary.LittleEndian.AppendUint64(raw, uint64(x))
		}
		return raw
	}
	table := kernels.Operand{Layout: kernels.Contiguous(2, 2), DType: dtype.F32, Mem: mem.Alloc(t, 16)}
	idx := kernels.Operand{Layout: kernels.Contiguous(4), DType: dtype.I64, Mem: mem.Alloc(t, 32)}
	dst := kernels.Operand{Layout: kernels.Contiguous(4, 2), DType: dtype.F32, Mem: mem.Alloc(t, 32)}
	defer func() {
		for _, o := range []kernels.Operand{table, idx, dst} {
			mem.Free(t, o.Mem)
		}
	}()
	var rows []byte
	for _, v := range []float32{1, 2, 3, 4} {
		rows = binary.LittleEndian.AppendUint32(rows, math.Float32bits(v))
	}
	mem.Write(t, table.Mem, rows)
	embed := func(indices ...int64) error {
		mem.Write(t, idx.Mem, i64s(indices...))
		require.NoError(t, b.Embedding(dst, table, idx, 2))
		return b.Check()
	}

	var ie *kernels.IndexError
	err := embed(1, 5, 0, -1)
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, kernels.IndexError{Op: "embedding", Pos: 1, Index: 5, Limit: 2}, *ie)
	held := b.Held()
	assert.Contains(t, held, cuda.Held{What: "kernels/cuda error flag", Bytes: 64})
	assert.Contains(t, held, cuda.Held{What: "kernels/cuda error record", Bytes: 48, Host: true}, "on a GPU with unified addressing")

	require.NoError(t, embed(1, 0, 1, 0), "the record was cleared")
	assert.Equal(t, slices.Concat(rows[8:], rows[:8], rows[8:], rows[:8]), mem.Read(t, dst.Mem), "rows 1, 0, 1, 0")
	err = embed(0, 0, 2, 0)
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, kernels.IndexError{Op: "embedding", Pos: 2, Index: 2, Limit: 2}, *ie)

	before := dev.Usage()
	require.NoError(t, b.Release())
	after := dev.Usage()
	assert.Equal(t, before.HostAllocs-1, after.HostAllocs)
	assert.Equal(t, before.HostBytes-48, after.HostBytes)
	assert.Empty(t, b.Held())
}
