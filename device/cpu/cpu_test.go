package cpu

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/devicetest"
	"github.com/subletml/sublet/internal/hostmem"
)

func newCPU(t *testing.T, capacity int64) *Device {
	t.Helper()
	d, err := New(Options{Capacity: capacity})
	require.NoError(t, err)
	return d
}

func TestConformance(t *testing.T) {
	devicetest.Run(t, func(t *testing.T) device.Device {
		return newCPU(t, 256<<20)
	}, devicetest.Config{KeepsData: true, ExactMemInfo: true, AllocUnit: hostmem.PageSize()})
}

func TestConformancePhysicalCapacity(t *testing.T) {
	devicetest.Run(t, func(t *testing.T) device.Device {
		return newCPU(t, 0)
	}, devicetest.Config{KeepsData: true, AllocUnit: hostmem.PageSize()})
}

func TestNewRejectsNegativeCapacity(t *testing.T) {
	_, err := New(Options{Capacity: -1})
	require.Error(t, err)
}

func TestPhysicalCapacityIsTotal(t *testing.T) {
	total, _, err := hostmem.Physical()
	if err != nil {
		t.Skip(err)
	}
	d := newCPU(t, 0)
	free, got, err := d.MemInfo()
	require.NoError(t, err)
	require.Equal(t, total, got)
	require.LessOrEqual(t, free, total)
	require.Positive(t, free)
}

func TestPointersAreHostAddresses(t *testing.T) {
	d := newCPU(t, 1<<20)
	p, err := d.Malloc(1000)
	require.NoError(t, err)
	require.Zero(t, int64(p)%hostmem.PageSize(), "each allocation is its own page-aligned mapping")
	b, ok := d.Bytes(p, 1000)
	require.True(t, ok)
	require.Equal(t, uintptr(p), uintptr(unsafe.Pointer(&b[0])))
	_, ok = d.Bytes(p+999, 2)
	require.False(t, ok, "Bytes past the requested size, though inside the page")
	require.NoError(t, d.Free(p))
	free, _, err := d.MemInfo()
	require.NoError(t, err)
	require.Equal(t, int64(1<<20), free)
}

func TestMallocHoldsWholePages(t *testing.T) {
	page := hostmem.PageSize()
	d := newCPU(t, 2*page)
	a, err := d.Malloc(1)
	require.NoError(t, err)
	b, err := d.Malloc(page)
	require.NoError(t, err)
	_, err = d.Malloc(1)
	require.ErrorIs(t, err, device.ErrOutOfMemory, "two pages held by a 1-byte and a page allocation")
	require.NoError(t, d.Free(a))
	require.NoError(t, d.Free(b))
	free, _, err := d.MemInfo()
	require.NoError(t, err)
	require.Equal(t, 2*page, free)
}

func TestNameAndKind(t *testing.T) {
	d := newCPU(t, 1<<20)
	require.Equal(t, "cpu", d.Name())
	require.Equal(t, device.CPU, d.Kind())
	require.Equal(t, "cpu", device.CPU.String())
}

// A Malloc the capacity admits but the OS refuses (2 EiB is beyond any address space)
// is out of memory, and gives its bytes back: were they still held, the third attempt
// would fail on the capacity (2^62) instead of on the OS.
func TestMallocTheOSRefusesHoldsNothing(t *testing.T) {
	d := newCPU(t, 1<<62)
	for range 3 {
		_, err := d.Malloc(1 << 61)
		require.ErrorIs(t, err, device.ErrOutOfMemory)
		require.ErrorContains(t, err, "mmap")
	}
	p, err := d.Malloc(1)
	require.NoError(t, err)
	require.NoError(t, d.Free(p))
}

// A Reserve the OS refuses is an error and leaves nothing reserved.
func TestReserveTheOSRefuses(t *testing.T) {
	d := newCPU(t, 1<<20)
	_, err := d.Reserve(1 << 61)
	require.ErrorContains(t, err, "cpu: Reserve(2305843009213693952)")
	require.ErrorContains(t, err, "mmap")
	p, err := d.Reserve(d.Granularity())
	require.NoError(t, err)
	require.NoError(t, d.Unreserve(p, d.Granularity()))
	require.Error(t, d.Unreserve(p, d.Granularity()), "released once")
}
