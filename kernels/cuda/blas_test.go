package cuda

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

func TestWorkspaceBytesAsPyTorch(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		env          string
		major, minor int
		want         int64
	}{
		{"", 9, 0, 32 * mib},                // sm_90: :4096:8
		{"", 8, 0, 4096*1024*2 + 16*1024*8}, // elsewhere: :4096:2:16:8
		{"", 10, 0, 4096*1024*2 + 16*1024*8},
		{":4096:8", 8, 6, 32 * mib},
		{":16:8", 9, 0, 128 * 1024},
		{":4096:2:16:8", 9, 0, 4096*1024*2 + 16*1024*8},
		{":0:0", 9, 0, 0},
		{"nonsense", 9, 0, 32 * mib},
	} {
		assert.Equal(t, c.want, WorkspaceBytes(c.env, c.major, c.minor), "%q on sm_%d%d", c.env, c.major, c.minor)
	}
}

func TestBLASCandidates(t *testing.T) {
	t.Setenv(BLASEnv, "off")
	_, err := blasCandidates()
	require.ErrorIs(t, err, ErrNoBLAS)
	t.Setenv(BLASEnv, "/opt/x/libcublas.so.12")
	c, err := blasCandidates()
	require.NoError(t, err)
	assert.Equal(t, []string{"/opt/x/libcublas.so.12"}, c, "an explicit library is the only candidate")
	t.Setenv(BLASEnv, "")
	t.Setenv("CUDA_HOME", t.TempDir())
	c, err = blasCandidates()
	require.NoError(t, err)
	assert.Equal(t, []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}, c[:3])

	// Whatever this machine has: loading needs no GPU.
	if s, err := BLAS(); err == nil {
		t.Logf("cuBLAS here: %s", s)
	} else {
		require.True(t, errors.Is(err, ErrNoBLAS), "%v", err)
		t.Logf("no cuBLAS here: %v", err)
	}
}

// gemmCall is the recorded cublasGemmStridedBatchedEx arguments by name.
type gemmCall struct {
	opA, opB, m, n, k, lda, ldb, ldc, strideA, strideB, strideC, batch, compute uintptr
	a, b, c                                                                     uintptr
	typeA, typeB, typeC                                                         uintptr
}

func decodeGemm(t *testing.T, c libRec) gemmCall {
	require.Equal(t, "cublasGemmStridedBatchedEx", c.name)
	a := c.args
	return gemmCall{opA: a[1], opB: a[2], m: a[3], n: a[4], k: a[5],
		a: a[7], typeA: a[8], lda: a[9], strideA: a[10], b: a[11], typeB: a[12], ldb: a[13], strideB: a[14],
		c: a[16], typeC: a[17], ldc: a[18], strideC: a[19], batch: a[20], compute: a[21]}
}

// lastGemm runs f and returns its one product call, requiring that nothing was
// launched on the fallback.
func lastGemm(t *testing.T, rec *recorder, f func()) gemmCall {
	t.Helper()
	rec.take()
	f()
	launches, calls := rec.take()
	require.Empty(t, launches, "no fallback kernel")
	var gemms []libRec
	for _, c := range calls {
		if c.name == "cublasGemmStridedBatchedEx" {
			gemms = append(gemms, c)
		}
	}
	require.Len(t, gemms, 1)
	return decodeGemm(t, gemms[0])
}

// TestMatmulOnCuBLAS: row-major C = A·B goes to cuBLAS as column-major Cᵀ = Bᵀ·Aᵀ
// (B first, m and n swapped); a transposed view is CUBLAS_OP_T with its own leading
// dimension, never a copy; a weight shared by a batch has stride 0; half types
// accumulate in F32; TF32 only when asked.
func TestMatmulOnCuBLAS(t *testing.T) {
	b, rec := newRecording(t)
	var o operands
	x, w, out := o.dense(dtype.F32, 4, 5), o.dense(dtype.F32, 5, 3), o.dense(dtype.F32, 4, 3)
	g := lastGemm(t, rec, func() { b.Matmul(out, x, w) })
	assert.Equal(t, gemmCall{opA: cublasOpN, opB: cublasOpN, m: 3, n: 4, k: 5, a: uintptr(addr(w)), lda: 3, b: uintptr(addr(x)), ldb: 5,
		c: uintptr(addr(out)), ldc: 3, batch: 1, compute: cublasCompute32F, typeA: cudaR32F, typeB: cudaR32F, typeC: cudaR32F}, g)

	// x·wᵀ with w [3, 5] stored row-major: the view wᵀ [5, 3] has strides [1, 5].
	wt := o.over(dtype.F32, kernels.Layout{Shape: []int{5, 3}, Strides: []int{1, 5}}, 15)
	g = lastGemm(t, rec, func() { b.Matmul(out, x, wt) })
	assert.Equal(t, uintptr(cublasOpT), g.opA, "the transposed weight")
	assert.Equal(t, uintptr(5), g.lda)
	assert.Equal(t, uintptr(cublasOpN), g.opB)

	// A batch [2, 4, 5] times a shared weight.
	xb, ob := o.dense(dtype.F32, 2, 4, 5), o.dense(dtype.F32, 2, 4, 3)
	g = lastGemm(t, rec, func() { b.Matmul(ob, xb, w) })
	assert.Equal(t, []uintptr{2, 0, 20, 12}, []uintptr{g.batch, g.strideA, g.strideB, g.strideC})

	// Half inputs, F32 out: F32 compute.
	h1, h2 := o.dense(dtype.BF16, 4, 5), o.dense(dtype.BF16, 5, 3)
	g = lastGemm(t, rec, func() { b.Matmul(out, h1, h2) })
	assert.Equal(t, []uintptr{cudaR16BF, cudaR16BF, cudaR32F, cublasCompute32F}, []uintptr{g.typeA, g.typeB, g.typeC, g.compute})

	b.SetTF32(true)
	g = lastGemm(t, rec, func() { b.Matmul(out, x, w) })
	assert.Equal(t, uintptr(cublasCompute32FFastTF32), g.compute)
	g = lastGemm(t, rec, func() { b.Matmul(o.dense(dtype.F16, 4, 3), o.dense(dtype.F16, 4, 5), o.dense(dtype.F16, 5, 3)) })
	assert.Equal(t, uintptr(cublasCompute32F), g.compute, "TF32 is for F32 operands")
	b.SetTF32(false)

	// What cuBLAS cannot take runs on the fallback: mixed types, a strided output.
	for name, f := range map[string]func(){
		"mixed": func() { b.Matmul(out, x, h2) },
		"out": func() {
			b.Matmul(o.over(dtype.F32, kernels.Layout{Shape: []int{4, 3}, Strides: []int{1, 4}}, 12), x, w)
		},
		"strided": func() {
			b.Matmul(out, o.over(dtype.F32, kernels.Layout{Shape: []int{4, 5}, Strides: []int{10, 2}}, 40), w)
		},
	} {
		rec.take()
		f()
		launches, calls := rec.take()
		require.Len(t, launches, 1, name)
		assert.Equal(t, kGemmTiled, launches[0].k, name)
		for _, c := range calls {
			assert.NotEqual(t, "cublasGemmStridedBatchedEx", c.name, name)
		}
	}

	// k = 0 fills the output with zeros; an empty output runs nothing.
	rec.take()
	b.Matmul(out, o.dense(dtype.F32, 4, 0), o.dense(dtype.F32, 0, 3))
	b.Matmul(o.dense(dtype.F32, 0, 3), o.dense(dtype.F32, 0, 5), w)
	launches, calls := rec.take()
	assert.Empty(t, launches, "a zero fill of a dense output is a memset")
	assert.Empty(t, calls)
}

// TestWorkspacePerStream: a handle gets a workspace from the device's caching
// allocator for each stream it runs on, named in Held, given back by Release.
func TestWorkspacePerStream(t *testing.T) {
	b, _ := newRecording(t)
	var o operands
	x, w := o.dense(dtype.F32, 4, 5), o.dense(dtype.F32, 5, 3)
	out := o.dense(dtype.F32, 4, 3)
	b.Matmul(out, x, w)
	out.Mem.Stream = 7
	b.Matmul(out, x, w)
	held := b.Held()
	require.Len(t, held, 2)
	for _, h := range held {
		assert.True(t, h.Allocator)
		assert.Equal(t, int64(1<<20), h.Bytes)
		assert.Contains(t, h.What, "cuBLAS workspace")
	}
	assert.Equal(t, int64(2<<20), b.al.Stats().RequestedBytes[alloc.StatAll].Current, "in the allocator's statistics")
	require.NoError(t, b.Release())
	assert.Empty(t, b.Held())
	assert.Zero(t, b.al.Stats().RequestedBytes[alloc.StatAll].Current)
}

// TestWorkspaceUnavailable: when the caching allocator cannot give the workspace, the
// product still runs on cuBLAS, without one, and nothing is reported as an error (the
// result is right); the next product tries to take the workspace again.
func TestWorkspaceUnavailable(t *testing.T) {
	b, rec := newRecordingOn(t, sim.Options{Capacity: 1 << 20, Occupied: 512 << 10}) // no room for 1 MiB
	var o operands
	x, w, out := o.dense(dtype.F32, 4, 5), o.dense(dtype.F32, 5, 3), o.dense(dtype.F32, 4, 3)
	for range 2 {
		b.Matmul(out, x, w)
		_, calls := rec.take()
		var names []string
		for _, c := range calls {
			names = append(names, c.name)
			if c.name == "cublasSetWorkspace_v2" {
				assert.Equal(t, []uintptr{c.args[0], 0, 0}, c.args, "no workspace")
			}
		}
		assert.Contains(t, names, "cublasSetWorkspace_v2", "set again: the handle tries again each time")
		assert.Contains(t, names, "cublasGemmStridedBatchedEx")
		require.NoError(t, b.Check())
		assert.Empty(t, b.Held())
	}
	assert.Zero(t, b.al.Stats().RequestedBytes[alloc.StatAll].Current, "nothing left in the allocator")
}

// TestWorkspacesUnderConcurrentReports: products on several streams from many
// goroutines while others read Held and call Release: the pool's state is read and
// written under its lock (go test -race), every handle ends set to a stream with a
// workspace or marked to be set again, and the allocator ends empty.
func TestWorkspacesUnderConcurrentReports(t *testing.T) {
	b, rec := newRecording(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var o operands
			x, w, out := o.dense(dtype.F32, 4, 5), o.dense(dtype.F32, 5, 3), o.dense(dtype.F32, 4, 3)
			for i := range 50 {
				out.Mem.Stream = device.Stream(1 + (g+i)%3)
				b.Matmul(out, x, w)
				switch i % 10 {
				case 3:
					for _, h := range b.Held() {
						assert.Equal(t, int64(1<<20), h.Bytes)
					}
				case 7:
					assert.NoError(t, b.Release())
				}
			}
		}()
	}
	wg.Wait()
	rec.take()
	require.NoError(t, b.Check())
	require.LessOrEqual(t, len(b.Held()), 3*8, "a workspace per handle and stream at most")
	require.NoError(t, b.Release())
	assert.Empty(t, b.Held())
	assert.Zero(t, b.al.Stats().RequestedBytes[alloc.StatAll].Current)
}
