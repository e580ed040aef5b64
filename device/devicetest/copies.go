package devicetest

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
)

func (s suite) copies(t *testing.T) {
	x := s.open(t)
	d := x.d
	st, err := d.NewStream()
	require.NoError(t, err)
	const n = 1<<20 + 4097
	a, b := x.malloc(n), x.malloc(n)
	want := pattern(n, 0x5a)
	require.NoError(t, d.CopyToDevice(a, want, st))
	require.NoError(t, d.CopyOnDevice(b, a, n, st))
	require.NoError(t, d.Memset(a+100, 0xee, 1000, st))
	require.NoError(t, d.CopyToDevice(b+n-3, []byte{1, 2, 3}, 0), "a copy ending exactly at the end")
	require.NoError(t, d.SynchronizeStream(st))
	require.NoError(t, d.CopyToDevice(a, nil, 0), "copying zero bytes")
	require.NoError(t, d.CopyOnDevice(b, a, 0, 0), "copying zero bytes on the device")
	require.NoError(t, d.Memset(a, 0, 0, 0), "setting zero bytes")
	gotA, gotB := x.read(a, n), x.read(b, n)
	if x.c.KeepsData {
		wantA := bytes.Clone(want)
		for i := 100; i < 1100; i++ {
			wantA[i] = 0xee
		}
		wantB := bytes.Clone(want)
		copy(wantB[n-3:], []byte{1, 2, 3})
		require.True(t, bytes.Equal(wantA, gotA), "host→device, memset, device→host round trip")
		require.True(t, bytes.Equal(wantB, gotB), "device→device copy")
		mid := x.read(a+99, 3)
		require.Equal(t, []byte{want[99], 0xee, 0xee}, mid, "a read at an offset")
	}
	require.NoError(t, d.Free(a))
	require.NoError(t, d.Free(b))
	require.NoError(t, d.DestroyStream(st))
	x.expectUsed(0)
}

// copyRanges: a copy outside a live allocation is an error, never a crash, even on a
// device that keeps no data.
func (s suite) copyRanges(t *testing.T) {
	x := s.open(t)
	d := x.d
	const n = 8192
	a, b := x.malloc(n), x.malloc(n)
	buf := make([]byte, 16)
	require.Error(t, d.CopyToDevice(a+n-8, buf, 0), "host→device past the end")
	require.Error(t, d.CopyToHost(buf, a+n-8, 0), "device→host past the end")
	require.Error(t, d.CopyOnDevice(a, b+n-8, 16, 0), "device→device reading past the end")
	require.Error(t, d.CopyOnDevice(b+n-8, a, 16, 0), "device→device writing past the end")
	require.Error(t, d.Memset(a+n-8, 0, 16, 0), "memset past the end")
	require.Error(t, d.CopyOnDevice(a, b, -1, 0), "negative size")
	require.Error(t, d.Memset(a, 0, -1, 0), "negative size")
	// No device hands out this handle: sim and cpu count streams from 1, and a CUDA
	// stream is an aligned pointer. It fits a 32-bit device.Stream.
	const unknown device.Stream = 0x7fff_ffff
	require.Error(t, d.CopyToDevice(a, buf, unknown), "unknown stream")
	require.Error(t, d.CopyToHost(buf, a, unknown), "unknown stream")
	require.Error(t, d.CopyOnDevice(a, b, 16, unknown), "unknown stream")
	require.Error(t, d.Memset(a, 0, 16, unknown), "unknown stream")
	require.NoError(t, d.Free(b))
	require.Error(t, d.CopyToDevice(b, buf, 0), "host→device into freed memory")
	require.Error(t, d.CopyToHost(buf, b, 0), "device→host from freed memory")
	require.Error(t, d.CopyOnDevice(a, b, 16, 0), "device→device from freed memory")
	require.Error(t, d.Memset(b, 0, 16, 0), "memset of freed memory")
	require.NoError(t, d.Free(a))
	x.expectUsed(0)
}
