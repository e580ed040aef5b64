package alloctest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
)

// memoryFraction: a fraction of the device's own total memory caps what the allocator
// reserves; refusals are OOMs the device never saw, and releasing the cache makes room.
func (s suite) memoryFraction(t *testing.T) {
	x := s.open(t, alloc.Config{})
	f := float64(101*mib) / float64(x.total)
	require.NoError(t, x.a.SetMemoryFraction(f))
	allowed := int64(f * float64(x.total))
	require.InDelta(t, 101*mib, allowed, 1)

	ps := x.allocN(3, 30*mib) // three 30 MiB segments: 90 MiB reserved
	_, err := x.a.Alloc(30*mib, 0)
	var oom *alloc.OOMError
	require.ErrorAs(t, err, &oom)
	assert.False(t, errors.Is(err, device.ErrOutOfMemory), "the fraction refused; the device was not asked")
	assert.Nil(t, oom.Err)
	assert.Equal(t, x.Dev.Name(), oom.Device)
	assert.Equal(t, allowed, oom.Allowed)
	assert.Equal(t, x.total, oom.Capacity)
	assert.Equal(t, 30*mib, oom.SegmentSize)
	assert.Equal(t, 90*mib, oom.Allocated)
	assert.Equal(t, 90*mib, oom.Reserved)
	assert.Equal(t, "large", oom.Pool)
	assert.Contains(t, err.Error(), "allowed; ")
	st := x.a.Stats()
	assert.Equal(t, int64(1), st.NumOOMs)
	assert.Equal(t, int64(1), st.NumAllocRetries, "the last-resort retry ran")
	assert.Equal(t, int64(3), st.NumDeviceAlloc)
	x.expectDevice(90 * mib)

	// A cached block is released to make room under the cap.
	x.free(ps[2])
	p := x.alloc(40*mib, 0)
	st = x.a.Stats()
	assert.Equal(t, 100*mib, cur(st.ReservedBytes))
	assert.Equal(t, int64(2), st.NumAllocRetries)
	assert.Equal(t, int64(1), st.NumDeviceFree)
	assert.Equal(t, int64(1), st.NumOOMs)
	x.expectDevice(100 * mib)

	// Even a small segment would go over the cap now.
	_, err = x.a.Alloc(1, 0)
	require.ErrorAs(t, err, &oom)
	assert.Equal(t, "small", oom.Pool)
	assert.Equal(t, int64(alloc.SmallBuffer), oom.SegmentSize)
	assert.Equal(t, int64(2), x.a.Stats().NumOOMs)

	// Lifting the cap to the whole device lets it through.
	require.NoError(t, x.a.SetMemoryFraction(1))
	q := x.alloc(1, 0)
	x.free(ps[0], ps[1], p, q)
}

// outOfMemory fills the device with large blocks until the device itself refuses, then
// checks the error, the counters and that releasing the cache lets a request through
// that the device had refused. Each block is about a twelfth of the device's free memory,
// so this takes a dozen raw allocations whatever the device's size.
func (s suite) outOfMemory(t *testing.T) {
	x := s.open(t, alloc.Config{})
	const step = 4 * mib // 1.5 × a multiple of 4 MiB is a whole segment size
	b := x.free0 / 12 / step * step
	if b < 32*mib {
		t.Skipf("%s has %d bytes free: too little to fill with large blocks", x.Dev.Name(), x.free0)
	}
	var held []device.Ptr
	var err error
	for len(held) < 64 {
		var p device.Ptr
		if p, err = x.a.Alloc(b, 0); err != nil {
			break
		}
		x.live[p] = b
		held = append(held, p)
	}
	n := int64(len(held))
	t.Logf("%s: %d blocks of %d bytes fit before the device refused (%d bytes free at the start)", x.Dev.Name(), n, b, x.free0)
	require.Error(t, err, "the device never refused")
	require.ErrorIs(t, err, device.ErrOutOfMemory, "the device's own error is wrapped")
	var oom *alloc.OOMError
	require.ErrorAs(t, err, &oom)
	require.GreaterOrEqual(t, n, int64(2), "too few blocks fit to test the retry")
	if x.ExactMemInfo {
		assert.Equal(t, x.free0/b, n)
		assert.Equal(t, x.free0-n*b, oom.DeviceFree)
	} else {
		assert.LessOrEqual(t, n, int64(12))
		// The driver keeps a little of what it reports free for itself.
		assert.Less(t, oom.DeviceFree, b+b/8, "the device refused with this much free")
	}
	assert.Equal(t, x.Dev.Name(), oom.Device)
	assert.Equal(t, b, oom.Requested)
	assert.Equal(t, b, oom.Rounded)
	assert.Equal(t, b, oom.SegmentSize)
	assert.Equal(t, "large", oom.Pool)
	assert.Equal(t, device.Stream(0), oom.Stream)
	assert.Equal(t, x.total, oom.Capacity)
	assert.Zero(t, oom.Allowed)
	assert.Equal(t, n*b, oom.Allocated)
	assert.Equal(t, n*b, oom.Reserved)
	assert.Zero(t, oom.InactiveSplitBytes)
	assert.Zero(t, oom.LargestFreeLarge+oom.LargestFreeSmall+oom.LargestFreeOnStream, "nothing was cached")
	assert.NotNil(t, oom.Err)
	assert.NotEmpty(t, oom.Hint)
	assert.Contains(t, err.Error(), "out of memory on "+x.Dev.Name())
	st := x.a.Stats()
	assert.Equal(t, int64(1), st.NumOOMs)
	assert.Equal(t, int64(1), st.NumAllocRetries)
	assert.Equal(t, int64(1), st.NumSyncAllStreams, "the retry released the (empty) cache")
	assert.Equal(t, n, st.NumDeviceAlloc)
	assert.Equal(t, n*b, cur(st.AllocatedBytes), "the failed request left no trace")
	x.expectDevice(n * b)

	// Two cached blocks, too small for 1.5 b; the device has less than b free. The
	// allocator asks the device, is refused, releases its cache and retries.
	x.free(held[n-1], held[n-2])
	big := x.alloc(b+b/2, 0)
	st = x.a.Stats()
	assert.Equal(t, int64(2), st.NumAllocRetries)
	assert.Equal(t, int64(1), st.NumOOMs, "the retry succeeded")
	assert.Equal(t, int64(2), st.NumDeviceFree, "both cached blocks went back first")
	assert.Equal(t, (n-2)*b+b+b/2, cur(st.ReservedBytes))
	x.expectDevice((n-2)*b + b + b/2)
	x.free(held[:n-2]...)
	x.free(big)
}
