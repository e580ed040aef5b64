package devicetest

import (
	"errors"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
)

func (s suite) mallocFree(t *testing.T) {
	x := s.open(t)
	sizes := []int64{1, 511, 512, 4096, 1<<20 + 3, 3 << 20}
	type live struct {
		p    device.Ptr
		size int64
	}
	var ls []live
	var used int64
	for _, size := range sizes {
		ls = append(ls, live{x.malloc(size), size})
		used += x.c.charged(size)
		x.expectUsed(used)
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].p < ls[j].p })
	for i := 1; i < len(ls); i++ {
		require.GreaterOrEqual(t, uintptr(ls[i].p), uintptr(ls[i-1].p)+uintptr(ls[i-1].size), "allocations overlap")
	}
	for _, l := range ls {
		require.NoError(t, x.d.Free(l.p))
		used -= x.c.charged(l.size)
		x.expectUsed(used)
	}
	x.expectUsed(0)
}

func (s suite) mallocErrors(t *testing.T) {
	x := s.open(t)
	for _, size := range []int64{0, -1} {
		_, err := x.d.Malloc(size)
		require.Error(t, err, "Malloc(%d)", size)
		require.False(t, errors.Is(err, device.ErrOutOfMemory), "Malloc(%d) is a bad request, not OOM: %v", size, err)
	}
	p := x.malloc(4096)
	require.Error(t, x.d.Free(p+512), "Free of a pointer inside an allocation")
	require.NoError(t, x.d.Free(p))
	err := x.d.Free(p)
	require.Error(t, err, "double Free")
	require.False(t, errors.Is(err, device.ErrOutOfMemory))
	require.Error(t, x.d.Free(0), "Free of the null pointer")
	x.expectUsed(0)
}

func (s suite) outOfMemory(t *testing.T) {
	x := s.open(t)
	_, err := x.d.Malloc(x.total + x.c.unit())
	require.ErrorIs(t, err, device.ErrOutOfMemory, "Malloc above the total")
	p := x.malloc(4096)
	require.NoError(t, x.d.Free(p), "the device works after an OOM")
	x.expectUsed(0)
	if !x.c.ExactMemInfo {
		return
	}
	// Fill the device exactly, then one more unit must fail.
	fill := x.free0 / x.c.unit() * x.c.unit()
	if fill == 0 {
		t.Fatalf("device reports %d free bytes: nothing to fill", x.free0)
	}
	p = x.malloc(fill)
	x.expectUsed(fill)
	_, err = x.d.Malloc(x.c.unit())
	require.ErrorIs(t, err, device.ErrOutOfMemory, "Malloc on a full device")
	x.expectUsed(fill)
	require.NoError(t, x.d.Free(p))
	x.expectUsed(0)
}
