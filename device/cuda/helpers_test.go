package cuda

import (
	_ "embed"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
)

//go:embed testdata/kernels.ptx
var kernelsPTX []byte

// testGPU is the one Device the tests share: opening retains the primary context, whose
// creation costs a fraction of a second, so it is done once per process.
var testGPU struct {
	once    sync.Once
	d       *Device
	kernels *testKernels
	err     error
}

type testKernels struct {
	fill, axpy, waitFlag *Function
}

// openTest returns the shared GPU, or skips the test where there is no driver or GPU. It
// registers a check that the test leaves no device memory behind.
func openTest(tb testing.TB) *Device {
	tb.Helper()
	testGPU.once.Do(func() {
		testGPU.d, testGPU.err = Open(0)
	})
	if err := testGPU.err; err != nil {
		if errors.Is(err, ErrNoDriver) || errors.Is(err, ErrNoDevice) {
			tb.Skip(err) // "cuda: no CUDA driver: <reason>" or "cuda: no CUDA device ..."
		}
		tb.Fatalf("cuda.Open(0): %v", err)
	}
	d := testGPU.d
	tb.Cleanup(func() { require.Equal(tb, Usage{}, d.Usage(), "%s: memory left live by %s", d.Name(), tb.Name()) })
	return d
}

// kernels loads testdata/kernels.ptx once into the shared GPU.
func kernels(tb testing.TB, d *Device) *testKernels {
	tb.Helper()
	if testGPU.kernels == nil {
		m, err := d.LoadModule(kernelsPTX)
		var ce *Error
		if errors.As(err, &ce) && ce.Name == "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" {
			tb.Skipf("the driver is older than testdata/kernels.ptx (PTX ISA 9.0, CUDA 13.0): %v", err)
		}
		require.NoError(tb, err)
		k := &testKernels{}
		for name, f := range map[string]**Function{"fill_u32": &k.fill, "axpy_f32": &k.axpy, "wait_flag": &k.waitFlag} {
			*f, err = m.Function(name)
			require.NoError(tb, err)
		}
		testGPU.kernels = k
	}
	return testGPU.kernels
}

// malloc allocates size bytes and frees them when the test ends.
func malloc(tb testing.TB, d *Device, size int64) device.Ptr {
	tb.Helper()
	p, err := d.Malloc(size)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, d.Free(p)) })
	return p
}

// newStream creates a stream destroyed when the test ends.
func newStream(tb testing.TB, d *Device) device.Stream {
	tb.Helper()
	s, err := d.NewStream()
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, d.DestroyStream(s)) })
	return s
}

// fill launches fill_u32 over n words at p on s.
func fill(tb testing.TB, d *Device, p device.Ptr, value uint32, n int, s device.Stream) {
	tb.Helper()
	k := kernels(tb, d)
	const block = 256
	cfg := LaunchConfig{Grid: Dim3{X: uint32((n + block - 1) / block)}, Block: Dim3{X: block}, Stream: s}
	require.NoError(tb, d.Launch(k.fill, cfg, ArgPtr(p), ArgUint32(value), ArgUint64(uint64(n))))
}

// lockThread keeps the test's goroutine on its OS thread until the test ends.
func lockThread(tb testing.TB) {
	runtime.LockOSThread()
	tb.Cleanup(runtime.UnlockOSThread)
}
