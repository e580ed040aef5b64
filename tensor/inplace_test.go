package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

func TestInPlaceOpsForOptimizersAndInit(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	p := f32(s, d, []float32{1, 2, 3, 4}, 2, 2).AsParameter()
	v0 := p.Version()
	g := tensor.NewGenerator(9)

	p.Scale(2)
	require.Equal(t, []float32{2, 4, 6, 8}, vals(p))
	p.AddScaled(-0.5, f32(s, d, []float32{2, 4}))
	require.Equal(t, []float32{1, 2, 5, 6}, vals(p), "the argument broadcasts")
	p.CopyFrom(s.Full(d, dtype.F16, 0.5, 2))
	require.Equal(t, []float32{0.5, 0.5, 0.5, 0.5}, vals(p))
	p.Fill(-1)
	require.Equal(t, []float32{-1, -1, -1, -1}, vals(p))
	require.Equal(t, v0+4, p.Version(), "every in-place write bumps the version")

	p.FillUniform(g, -0.1, 0.1)
	for _, v := range vals(p) {
		require.True(t, v >= -0.1 && v < 0.1)
	}
	big := s.Empty(d, dtype.F32, 4000)
	big.FillNormal(g, 3, 0.5)
	mean := 0.0
	for _, v := range vals(big) {
		mean += float64(v)
	}
	require.InDelta(t, 3, mean/4000, 0.05)

	require.Equal(t, device.Host, p.Storage().Residency())
	host := p.Storage().Host()
	require.Len(t, host, 16)
	host[0], host[1], host[2], host[3] = 0, 0, 0x28, 0x42 // 42 as a little-endian float32
	p.Storage().BumpVersion()
	require.Equal(t, float32(42), vals(p)[0])

	requireOpError(t, "AddScaled", tensor.ErrShape, func() { p.AddScaled(1, s.Ones(d, dtype.F32, 3)) })
	meta := newSim(t, 1<<30, false)
	m := s.Zeros(meta, dtype.F32, 8)
	require.Equal(t, device.Meta, m.Storage().Residency())
	require.Nil(t, m.Storage().Host(), "no data on the meta device")
	m.FillNormal(g, 0, 1)
	s.Close()
	p.Release()
	requireEmpty(t, d)
	requireEmpty(t, meta)
}
