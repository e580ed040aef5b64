package alloc

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/device"
)

func TestFractionRefusesWithoutDeviceCall(t *testing.T) {
	a, d := newAlloc(t, 100*MiB, Config{})
	require.NoError(t, a.SetMemoryFraction(0.5))
	p := mustAlloc(t, a, 30*MiB, 0)
	_, err := a.Alloc(30*MiB, 0)
	var oom *OOMError
	require.ErrorAs(t, err, &oom)
	assert.False(t, errors.Is(err, device.ErrOutOfMemory), "the fraction refused; the device was not asked")
	assert.Nil(t, oom.Err)
	assert.Equal(t, int64(1), d.Stats().Mallocs, "only the first segment reached the device")
	assert.Zero(t, d.Stats().OOMs+d.Stats().Faults)
	assert.Equal(t, int64(50*MiB), oom.Allowed)
	assert.Equal(t, int64(30*MiB), oom.SegmentSize)
	assert.Equal(t, int64(30*MiB), oom.Allocated)
	assert.Equal(t, int64(30*MiB), oom.Reserved)
	assert.Equal(t, int64(100*MiB), oom.Capacity)
	assert.Equal(t, int64(70*MiB), oom.DeviceFree)
	assert.Contains(t, err.Error(), "Tried to allocate 30.00 MiB.")
	assert.Contains(t, err.Error(), "50.00 MiB allowed; ")
	assert.Contains(t, oom.Hint, "per_process_memory_fraction", "the device has 70 MiB free: the fraction refused")
	assert.NotContains(t, oom.Hint, "more memory than is free on the device")
	st := a.Stats()
	assert.Equal(t, int64(1), st.NumOOMs)
	assert.Equal(t, int64(1), st.NumAllocRetries, "the last-resort retry ran")
	assert.Equal(t, int64(1), st.NumSyncAllStreams)
	assert.Equal(t, int64(30*MiB), cur(st.AllocatedBytes), "a failed request leaves no trace in the byte stats")
	assert.Equal(t, int64(30*MiB), cur(st.ReservedBytes))
	assert.Equal(t, int64(1), cur(st.Allocation))

	// Within the cap, cached memory is still reused and new segments still fit.
	q := mustAlloc(t, a, 20*MiB, 0)
	mustFree(t, a, p, q)
	requireDrained(t, a, d)
}

// The fraction check uses the segment size a, not the rounded request, and compares
// with > (reserved + a may equal the cap).
func TestFractionBoundary(t *testing.T) {
	a, d := newAlloc(t, 100*MiB, Config{})
	require.NoError(t, a.SetMemoryFraction(0.4)) // 40 MiB
	p := mustAlloc(t, a, 2*MiB, 0)               // 20 MiB segment
	q := mustAlloc(t, a, 18*MiB+1, 0)            // 20 MiB segment: reserved becomes exactly 40
	_, err := a.Alloc(1, 0)                      // a 2 MiB small segment would exceed the cap
	var oom *OOMError
	require.ErrorAs(t, err, &oom)
	assert.Equal(t, int64(SmallBuffer), oom.SegmentSize)
	assert.Equal(t, "small", oom.Pool)
	mustFree(t, a, p, q)
	requireDrained(t, a, d)
	require.Error(t, a.SetMemoryFraction(1.5))
	require.Error(t, a.SetMemoryFraction(-0.1))
}

func TestDeviceOOMWrapsErrOutOfMemory(t *testing.T) {
	a, d := newAlloc(t, 64*MiB, Config{})
	p := mustAlloc(t, a, 40*MiB, 0)
	s := mustAlloc(t, a, 4096, 0)
	mustFree(t, a, s) // a cached 2 MiB segment, released by the retry
	_, err := a.Alloc(40*MiB, 0)
	require.ErrorIs(t, err, device.ErrOutOfMemory)
	var oom *OOMError
	require.ErrorAs(t, err, &oom)
	assert.Equal(t, "sim", oom.Device)
	assert.Equal(t, int64(40*MiB), oom.Requested)
	assert.Equal(t, int64(40*MiB), oom.Rounded)
	assert.Equal(t, "large", oom.Pool)
	assert.Equal(t, int64(24*MiB), oom.DeviceFree, "after the retry released the cached 2 MiB segment")
	assert.Zero(t, oom.Allowed)
	st := a.Stats()
	assert.Equal(t, int64(1), st.NumOOMs)
	assert.Equal(t, int64(1), st.NumAllocRetries)
	assert.Equal(t, int64(1), st.NumDeviceFree)
	assert.Equal(t, int64(2), st.NumDeviceAlloc)
	msg := err.Error()
	assert.Contains(t, msg, "Tried to allocate 40.00 MiB. Device sim has a total capacity of 64.00 MiB of which 24.00 MiB is free.")
	assert.Contains(t, msg, "Of the allocated memory 40.00 MiB is allocated by sublet, and 0 bytes is reserved by sublet but unallocated.")
	assert.NotContains(t, msg, "allowed;")
	assert.Contains(t, msg, "request: 41943040 bytes (rounded to 41943040) from the large pool on stream 0")
	assert.Contains(t, msg, "hint: the request needs more memory than is free on the device")
	mustFree(t, a, p)
	requireDrained(t, a, d)
}

func TestOOMHints(t *testing.T) {
	base := OOMError{Rounded: 10 * MiB}
	for _, c := range []struct {
		name       string
		e          OOMError
		expandable bool
		maxSplit   bool
		want       string
	}{
		{"near the limit", OOMError{Allocated: 95 * MiB, Reserved: 96 * MiB}, false, false, "reduce the batch size"},
		{"another stream", OOMError{Allocated: 10 * MiB, Reserved: 60 * MiB, LargestFreeLarge: 40 * MiB, LargestFreeOnStream: 0}, false, false, "another stream"},
		{"split segments", OOMError{Allocated: 40 * MiB, Reserved: 80 * MiB, InactiveSplitBytes: 30 * MiB, LargestFreeLarge: 8 * MiB}, false, false, "max_split_size_mb"},
		{"fragmented", OOMError{Allocated: 40 * MiB, Reserved: 80 * MiB, InactiveSplitBytes: 5 * MiB, LargestFreeLarge: 8 * MiB}, false, false, "expandable_segments:True"},
		{"not enough", OOMError{Allocated: 40 * MiB, Reserved: 45 * MiB}, false, false, "more memory than is free"},
		{"fraction", OOMError{Rounded: 60 * MiB, Allowed: 100 * MiB, Allocated: 40 * MiB, Reserved: 45 * MiB, SegmentSize: 60 * MiB, DeviceFree: GiB}, false, false,
			"new 60.00 MiB segment would take reserved memory to 105.00 MiB, over the 100.00 MiB"},
	} {
		e := c.e
		if e.Rounded == 0 {
			e.Rounded = base.Rounded
		}
		assert.Contains(t, e.hint(100*MiB, c.expandable, c.maxSplit), c.want, c.name)
	}
}

func TestFormatBytes(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0 bytes"}, {1024, "1024 bytes"}, {1025, "1.00 KiB"}, {MiB, "1024.00 KiB"},
		{MiB + 1, "1.00 MiB"}, {20 * MiB, "20.00 MiB"}, {GiB, "1024.00 MiB"}, {GiB + 1, "1.00 GiB"},
		{139*GiB + 800*MiB, "139.78 GiB"},
	} {
		assert.Equal(t, c.want, formatBytes(c.n), "%d", c.n)
	}
}

// Every OOM comes after the cache was released, so a cached block that survives it sits
// in a segment with live blocks: the hint must not send the caller to EmptyCache.
func TestOOMHintOtherStreamBlockIsNotReleasable(t *testing.T) {
	a, d := newAlloc(t, 64*MiB, Config{})
	s1 := newStream(t, d, false)
	mustFree(t, a, mustAlloc(t, a, 40*MiB, s1))
	b := mustAlloc(t, a, 10*MiB, s1) // splits the 40 MiB segment: 30 MiB cached on s1
	_, err := a.Alloc(30*MiB, 0)
	var oom *OOMError
	require.ErrorAs(t, err, &oom)
	assert.Equal(t, int64(30*MiB), oom.LargestFreeLarge)
	assert.Zero(t, oom.LargestFreeOnStream)
	assert.Contains(t, oom.Hint, "another stream")
	assert.NotContains(t, oom.Hint, "EmptyCache")
	require.NoError(t, a.EmptyCache())
	_, err = a.Alloc(30*MiB, 0)
	require.ErrorAs(t, err, &oom, "EmptyCache does not help")
	mustFree(t, a, b)
	requireDrained(t, a, d)
}

// When the device cannot tell its memory, the OOM reports capacity and free memory as
// unknown (0) and the hint does not compare the live bytes with a limit of 0.
func TestOOMWithoutMemInfo(t *testing.T) {
	a, f, d := newFlakyAlloc(t, 64*MiB, Config{})
	f.failNext("MemInfo", always)
	p := mustAlloc(t, a, 10*MiB, 0)
	_, err := a.Alloc(60*MiB, 0)
	var oom *OOMError
	require.ErrorAs(t, err, &oom)
	assert.Zero(t, oom.Capacity)
	assert.NotContains(t, oom.Hint, "of the 0 bytes")
	assert.Contains(t, oom.Hint, "free memory is unknown")
	mustFree(t, a, p)
	requireDrained(t, a, d)
}

// On a device smaller than a segment, a request that would fit fails because of the
// segment it needs: the hint says that, not that the request is too large.
func TestOOMHintSegmentRounding(t *testing.T) {
	a, d := newAlloc(t, 16*MiB, Config{})
	_, err := a.Alloc(2*MiB, 0)
	var oom *OOMError
	require.ErrorAs(t, err, &oom)
	assert.Equal(t, int64(LargeBuffer), oom.SegmentSize)
	assert.Equal(t, "the request (2.00 MiB) would fit in the 16.00 MiB free on the device, but it needs a new 20.00 MiB segment "+
		"(rounded sizes up to 1 MiB take a 2 MiB segment, those below 10 MiB a 20 MiB one, as in PyTorch; no setting changes that): "+
		"free memory held by other processes, or use a device with more memory", oom.Hint)
	assert.Contains(t, err.Error(), "hint: the request (2.00 MiB) would fit")

	// A request larger than the free memory keeps the free-memory hint.
	_, err = a.Alloc(18*MiB, 0)
	require.ErrorAs(t, err, &oom)
	assert.Contains(t, oom.Hint, "the request needs more memory than is free on the device (16.00 MiB free")
	requireDrained(t, a, d)

	// From 10 MiB on, segments are rounded up to 2 MiB only.
	a, d = newAlloc(t, 15*MiB+MiB/2, Config{})
	_, err = a.Alloc(15*MiB+1, 0)
	require.ErrorAs(t, err, &oom)
	assert.Contains(t, oom.Hint, "the request (15.00 MiB) would fit in the 15.50 MiB free on the device, but it needs a new 16.00 MiB segment "+
		"(segments for 10 MiB or more are rounded up to a multiple of 2 MiB")
	requireDrained(t, a, d)
}

// Under a memory fraction the room is what the fraction still allows.
func TestOOMHintSegmentRoundingUnderFraction(t *testing.T) {
	a, d := newAlloc(t, 100*MiB, Config{})
	require.NoError(t, a.SetMemoryFraction(0.9)) // 90 MiB allowed
	p := mustAlloc(t, a, 72*MiB, 0)              // a 72 MiB segment, nothing cached
	_, err := a.Alloc(2*MiB, 0)                  // needs a 20 MiB segment; 18 MiB are left
	var oom *OOMError
	require.ErrorAs(t, err, &oom)
	assert.Nil(t, oom.Err, "the fraction refused, not the device")
	assert.Contains(t, oom.Hint, "the request (2.00 MiB) would fit in the 18.00 MiB the memory fraction still allows, but it needs a new 20.00 MiB segment")
	assert.Contains(t, oom.Hint, "raise per_process_memory_fraction in SUBLET_ALLOC_CONF (or SetMemoryFraction) by at least 2.00 MiB")
	mustFree(t, a, p)
	requireDrained(t, a, d)
}
