package devicetest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
)

func (s suite) virtualMemory(t *testing.T) {
	x := s.open(t)
	vm, ok := x.d.(device.VirtualMemory)
	if !ok {
		t.Skipf("%s does not implement device.VirtualMemory", x.d.Name())
	}
	d := x.d
	g := vm.Granularity()
	require.Positive(t, g)
	require.Zero(t, g&(g-1), "granularity %d is a power of two", g)

	// Reserving more than the device's memory takes address space only.
	big := (x.total + x.total/8 + g - 1) / g * g
	r, err := vm.Reserve(big)
	require.NoError(t, err, "Reserve(%d)", big)
	require.Zero(t, int64(r)%g, "reservation %#x aligned to the granularity", uintptr(r))
	require.NoError(t, vm.Unreserve(r, big))
	x.expectUsed(0)

	r, err = vm.Reserve(8 * g)
	require.NoError(t, err)
	// Pieces [0,2g) and [2g,3g) are adjacent; [5g,6g) stands alone.
	require.NoError(t, vm.Map(r, 2*g))
	require.NoError(t, vm.Map(r+device.Ptr(2*g), g))
	require.NoError(t, vm.Map(r+device.Ptr(5*g), g))
	x.expectUsed(4 * g)

	for name, bad := range map[string][2]int64{
		"overlapping a piece":       {g, 2 * g},
		"unaligned start":           {3*g + 512, g},
		"unaligned size":            {3 * g, g / 2},
		"past the reservation":      {7 * g, 2 * g},
		"empty":                     {3 * g, 0},
		"overlapping a later piece": {4 * g, 2 * g},
	} {
		err := vm.Map(r+device.Ptr(bad[0]), bad[1])
		require.Error(t, err, "Map %s", name)
		require.False(t, errors.Is(err, device.ErrOutOfMemory), "Map %s is a bad request, not OOM: %v", name, err)
	}
	a := x.malloc(g)
	require.Error(t, vm.Map(a, g), "Map outside any reservation")
	require.NoError(t, d.Free(a))
	x.expectUsed(4 * g)

	// A copy across the boundary of two adjacent pieces.
	across := r + device.Ptr(2*g-8)
	want := pattern(16, 3)
	require.NoError(t, d.CopyToDevice(across, want, 0))
	if x.c.KeepsData {
		require.Equal(t, want, x.read(across, 16), "data across adjacent pieces")
	}
	require.NoError(t, d.Memset(r, 7, 3*g, 0), "memset over adjacent pieces")
	require.Error(t, d.Memset(r, 7, 3*g+1, 0), "memset running into an unmapped page")
	require.Error(t, d.CopyToDevice(r+device.Ptr(3*g), want, 0), "copy into an unmapped page")
	require.Error(t, d.CopyToDevice(r+device.Ptr(6*g-8), want, 0), "copy past a lone piece")
	if x.c.KeepsData {
		require.True(t, bytes.Equal(bytes.Repeat([]byte{7}, 32), x.read(r+device.Ptr(3*g-32), 32)))
	}

	require.Error(t, vm.Unmap(r, g), "Unmap of part of a piece")
	require.Error(t, vm.Unmap(r, 3*g), "Unmap of two pieces at once")
	require.Error(t, vm.Unreserve(r, 8*g), "Unreserve with pieces mapped")
	require.NoError(t, vm.Unmap(r+device.Ptr(2*g), g))
	require.Error(t, vm.Unmap(r+device.Ptr(2*g), g), "Unmap twice")
	require.Error(t, d.CopyToDevice(across, want, 0), "copy into a piece that was unmapped")
	x.expectUsed(3 * g)
	// A piece can be mapped again where one was unmapped.
	require.NoError(t, vm.Map(r+device.Ptr(2*g), g))
	require.NoError(t, d.CopyToDevice(across, want, 0))
	if rm, ok := vm.(device.Remapper); ok {
		remap(x, rm, r, g)
	}
	for _, off := range []int64{0, 2 * g, 5 * g} {
		size := g
		if off == 0 {
			size = 2 * g
		}
		require.NoError(t, vm.Unmap(r+device.Ptr(off), size))
	}
	x.expectUsed(0)
	require.Error(t, vm.Unreserve(r, 4*g), "Unreserve with the wrong size")
	require.NoError(t, vm.Unreserve(r, 8*g))
	require.Error(t, vm.Unreserve(r, 8*g), "Unreserve twice")
	require.Error(t, vm.Map(r, g), "Map in a released reservation")
	x.expectUsed(0)

	if x.c.ExactMemInfo {
		s.mapOutOfMemory(x, vm)
	}
}

// remap moves the lone piece [5g, 6g) of reservation r to [6g, 7g) and back, with the
// pieces [0, 2g) and [2g, 3g) mapped: the memory in use stays, the old range is
// unmapped, the new one usable, and bad requests change nothing.
func remap(x *session, rm device.Remapper, r device.Ptr, g int64) {
	t, d := x.t, x.d
	at := func(k int64) device.Ptr { return r + device.Ptr(k*g) }
	require.NoError(t, rm.Remap(at(5), at(6), g))
	x.expectUsed(4 * g)
	require.NoError(t, d.Memset(at(6), 9, g, 0), "memset over the moved piece")
	require.Error(t, d.Memset(at(5), 9, g, 0), "memset where the piece was")
	for name, bad := range map[string][3]int64{
		"onto a mapped piece":  {6, 0, 1},
		"of part of a piece":   {0, 3, 1},
		"of two pieces":        {0, 3, 3},
		"from unmapped space":  {4, 3, 1},
		"past the reservation": {6, 8, 1},
		"onto its own range":   {6, 6, 1},
	} {
		err := rm.Remap(at(bad[0]), at(bad[1]), bad[2]*g)
		require.Error(t, err, "Remap %s", name)
		require.False(t, errors.Is(err, device.ErrOutOfMemory), "Remap %s is a bad request, not OOM: %v", name, err)
	}
	x.expectUsed(4 * g)
	require.NoError(t, d.Memset(at(6), 9, g, 0), "the moved piece is still mapped")
	require.NoError(t, rm.Remap(at(6), at(5), g))
	require.NoError(t, d.Memset(at(5), 9, g, 0), "the piece moved back")
	x.expectUsed(4 * g)
}

// mapOutOfMemory: a Map beyond the free memory wraps ErrOutOfMemory and maps nothing.
func (s suite) mapOutOfMemory(x *session, vm device.VirtualMemory) {
	t := x.t
	g := vm.Granularity()
	fill := x.free0 / g * g
	size := fill + g
	r, err := vm.Reserve(size)
	require.NoError(t, err)
	err = vm.Map(r, size)
	require.ErrorIs(t, err, device.ErrOutOfMemory, "Map of %d bytes with %d free", size, x.free0)
	x.expectUsed(0)
	require.NoError(t, vm.Map(r, fill))
	x.expectUsed(fill)
	require.ErrorIs(t, vm.Map(r+device.Ptr(fill), g), device.ErrOutOfMemory, "Map on a full device")
	require.NoError(t, vm.Unmap(r, fill))
	require.NoError(t, vm.Unreserve(r, size))
	x.expectUsed(0)
}
