package pinned

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device/cuda"
)

// openGPU opens cuda:0 for the test, or skips where there is no driver or GPU.
func openGPU(tb testing.TB) *cuda.Device {
	tb.Helper()
	d, err := cuda.Open(0)
	if errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice) {
		tb.Skip(err)
	}
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, d.Close(), "the GPU holds no memory at the end") })
	return d
}

func TestOnGPU(t *testing.T) {
	roundTrip(t, alloc.PinnedConfig{}, cuda.Usage{HostAllocs: 1, HostBytes: 4 << 20})
}

// With pinned_use_cuda_host_register, blocks are mmap'd memory faulted in by 8
// goroutines and registered with cuMemHostRegister.
func TestOnGPUHostRegister(t *testing.T) {
	roundTrip(t, alloc.PinnedConfig{UseHostRegister: true, NumRegisterThreads: 8}, cuda.Usage{HostRegistrations: 1, RegisteredBytes: 4 << 20})
}

// roundTrip copies a 3 MiB block to the GPU and back through an allocator with cfg,
// reusing the block once the stream's event has completed; usage is the GPU's usage
// while the block is live: one allocation of the rounded size.
func roundTrip(t *testing.T, cfg alloc.PinnedConfig, usage cuda.Usage) {
	d := openGPU(t)
	a, err := NewConfig(d, cfg)
	require.NoError(t, err)
	assert.True(t, a.Pinned(), "cuda offers page-locked memory")
	const n = 3 << 20
	b, err := a.Alloc(n)
	require.NoError(t, err)
	assert.Equal(t, usage, d.Usage(), "one allocation of the rounded size")
	for i := range b {
		b[i] = byte(i * 3)
	}
	want := bytes.Clone(b)
	p, err := d.Malloc(n)
	require.NoError(t, err)
	s, err := d.NewStream()
	require.NoError(t, err)
	require.NoError(t, d.CopyToDeviceAsync(p, b, s))
	require.NoError(t, a.RecordEvent(b, s))
	require.NoError(t, a.Free(b))
	require.NoError(t, d.SynchronizeStream(s))

	b2, err := a.Alloc(n)
	require.NoError(t, err)
	assert.Equal(t, base(b), base(b2), "the event completed: the block is reused")
	clear(b2)
	require.NoError(t, d.CopyToHostAsync(b2, p, s))
	require.NoError(t, d.SynchronizeStream(s))
	require.Equal(t, want, b2)
	require.NoError(t, a.Free(b2))

	require.NoError(t, d.Free(p))
	require.NoError(t, d.DestroyStream(s))
	require.NoError(t, a.Close())
	assert.Equal(t, cuda.Usage{}, d.Usage())
	assert.Equal(t, int64(1), a.Stats().NumHostFree)
}
