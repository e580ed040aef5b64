package devicetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
)

func (s suite) hostMemory(t *testing.T) {
	x := s.open(t)
	hm, ok := x.d.(device.HostMemory)
	if !ok {
		require.Equal(t, device.Remote, x.d.Residency(), "a device the CPU cannot address")
		t.Skipf("%s does not implement device.HostMemory", x.d.Name())
	}
	d := x.d
	want := device.Meta
	if x.c.KeepsData {
		want = device.Host
	}
	require.Equal(t, want, d.Residency())
	const n = 3 * 4096
	p := x.malloc(n)
	b, ok := hm.Bytes(p, n)
	if !x.c.KeepsData {
		require.False(t, ok, "a device that keeps no data has no bytes")
		require.NoError(t, d.Free(p))
		x.expectUsed(0)
		return
	}
	require.True(t, ok)
	require.Len(t, b, n)
	copy(b, pattern(n, 9))
	require.Equal(t, pattern(n, 9)[100:200], x.read(p+100, 100), "writes through Bytes are device data")
	require.NoError(t, d.Memset(p+4096, 0x33, 10, 0))
	mid, ok := hm.Bytes(p+4096, 10)
	require.True(t, ok)
	require.Equal(t, []byte{0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33}, mid)
	require.Len(t, mid, 10)
	require.Equal(t, 10, cap(mid), "Bytes is capped at n bytes")
	_, ok = hm.Bytes(p+n-4, 8)
	require.False(t, ok, "Bytes past the end of an allocation")
	_, ok = hm.Bytes(p, 0)
	require.False(t, ok, "Bytes of nothing")
	require.NoError(t, d.Free(p))
	_, ok = hm.Bytes(p, 1)
	require.False(t, ok, "Bytes of freed memory")

	if vm, isVM := x.d.(device.VirtualMemory); isVM {
		g := vm.Granularity()
		r, err := vm.Reserve(4 * g)
		require.NoError(t, err)
		require.NoError(t, vm.Map(r, g))
		require.NoError(t, vm.Map(r+device.Ptr(g), g))
		require.NoError(t, vm.Map(r+device.Ptr(3*g), g))
		across, ok := hm.Bytes(r+device.Ptr(g-8), 16)
		require.True(t, ok, "Bytes across adjacent mapped pieces")
		copy(across, pattern(16, 1))
		require.Equal(t, pattern(16, 1), x.read(r+device.Ptr(g-8), 16))
		whole, ok := hm.Bytes(r, 2*g)
		require.True(t, ok, "Bytes of two whole adjacent pieces")
		require.Len(t, whole, int(2*g))
		_, ok = hm.Bytes(r+device.Ptr(2*g-8), 16)
		require.False(t, ok, "Bytes running into an unmapped page")
		_, ok = hm.Bytes(r+device.Ptr(g), 3*g)
		require.False(t, ok, "Bytes across an unmapped gap")
		require.NoError(t, vm.Unmap(r+device.Ptr(g), g))
		_, ok = hm.Bytes(r+device.Ptr(g-8), 16)
		require.False(t, ok, "Bytes across a piece that was unmapped")
		require.NoError(t, vm.Unmap(r, g))
		require.NoError(t, vm.Unmap(r+device.Ptr(3*g), g))
		require.NoError(t, vm.Unreserve(r, 4*g))
	}
	x.expectUsed(0)
}
