package pinned

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	d := openGPU(t)
	a, err := New(d)
	require.NoError(t, err)
	assert.True(t, a.Pinned(), "cuda offers page-locked memory")
	const n = 3 << 20
	b, err := a.Alloc(n)
	require.NoError(t, err)
	assert.Equal(t, cuda.Usage{HostAllocs: 1, HostBytes: 4 << 20}, d.Usage(), "one cuMemHostAlloc of the rounded size")
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
