package tensor_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// CopyToHost and FromBytes carry a tensor's raw little-endian bytes both ways, from a
// strided view too, on host devices, a remote one and a remote one with asynchronous
// copies (which they report).
func TestCopyToHostAndFromBytes(t *testing.T) {
	async := tensortest.NewGPU(t, "cuda:1")
	devs := map[string]device.Device{"cpu": newCPU(t), "sim": newSim(t, 64<<20, true), "remote": tensortest.NewRemote(t, "cuda:0"), "async": async}
	for name, d := range devs {
		s := tensor.NewScope()
		x := f32(s, d, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
		b := make([]byte, 24)
		require.Equal(t, name == "async", x.CopyToHost(b), "%s: a GPU copies asynchronously", name)
		require.Equal(t, uint32(0x40c00000), binary.LittleEndian.Uint32(b[20:]), "%s: 6 last", name)
		require.False(t, x.T().CopyToHost(b), "%s: a strided tensor is laid out on the host", name)
		got := make([]float32, 6)
		for i := range got {
			got[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		require.Equal(t, []float32{1, 4, 2, 5, 3, 6}, got, "%s: the transpose, row-major", name)
		y := tensor.FromBytes(s, d, dtype.F32, b, 3, 2)
		require.Equal(t, vals(x.T()), vals(y), name)
		v := x.Version()
		x.SetBytes(b)
		require.Equal(t, []float32{1, 4, 2, 5, 3, 6}, vals(x), "%s: written in place", name)
		require.Equal(t, v+1, x.Version())
		requireOpError(t, "SetBytes", tensor.ErrShape, func() { x.T().SetBytes(b) })
		requireOpError(t, "SetBytes", tensor.ErrShape, func() { x.SetBytes(b[1:]) })
		h := make([]byte, 4)
		tensor.FromSlice(s, d, dtype.F16, []float32{1, -2}).CopyToHost(h)
		require.Equal(t, []byte{0x00, 0x3c, 0x00, 0xc0}, h, "%s: float16 1 and −2", name)
		requireOpError(t, "CopyToHost", tensor.ErrShape, func() { x.CopyToHost(b[:8]) })
		requireOpError(t, "FromBytes", tensor.ErrShape, func() { tensor.FromBytes(s, d, dtype.F32, b, 7) })
		s.Close()
		requireEmpty(t, d)
	}
	require.Equal(t, 4, async.Async, "the contiguous reads and the writes were asynchronous")
	cpuDev := newCPU(t)
	s0 := tensor.NewScope()
	requireOpError(t, "SetBytes", tensor.ErrGrad, func() {
		f32(s0, cpuDev, []float32{1}, 1).SetRequiresGrad(true).Exp().SetBytes(make([]byte, 4))
	})
	s0.Close()
	requireEmpty(t, cpuDev)
	meta := newSim(t, 1<<30, false)
	s := tensor.NewScope()
	x := s.Zeros(meta, dtype.F32, 1<<20)
	require.False(t, x.CopyToHost(make([]byte, x.Bytes())))
	require.Equal(t, 2*x.Bytes(), func() int64 {
		tensor.FromBytes(s, meta, dtype.F32, make([]byte, x.Bytes()), 1<<20)
		return requested(t, meta)
	}())
	s.Close()
	requireEmpty(t, meta)
}
