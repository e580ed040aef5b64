package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// withGrads makes a parameter on each of devs, of the given dtype, whose gradient is
// grads[i] (a backward of Σ p·grads[i]); the caller releases them.
func withGrads(t *testing.T, devs []device.Device, dt dtype.DType, grads ...[]float32) []*tensor.Tensor {
	t.Helper()
	s := tensor.NewScope()
	defer s.Close()
	var ps []*tensor.Tensor
	for i, g := range grads {
		d := devs[i%len(devs)]
		p := s.Keep(s.Zeros(d, dt, len(g))).AsParameter()
		ps = append(ps, p)
		f32(s, d, g, len(g)).Cast(dt).Mul(s.Bind(p)).Sum().Backward()
	}
	return ps
}

func gradsOf(ps []*tensor.Tensor) [][]float32 {
	out := make([][]float32, len(ps))
	for i, p := range ps {
		out[i] = vals(p.Grad())
	}
	return out
}

func releaseParams(ps []*tensor.Tensor) {
	for _, p := range ps {
		p.Release()
	}
}

func TestClipGradNormKnownValues(t *testing.T) {
	cpu, sim := newCPU(t), tensortest.Sim(t, 1<<30, true)
	for _, c := range []struct {
		name   string
		p      float64
		total  float64
		devs   []device.Device
		maxArg float64
	}{
		{"2-norm", 0, 13, []device.Device{cpu}, 6.5}, // √(3²+4²) = 5 and 12: √(5²+12²)
		{"1-norm", 1, 19, []device.Device{cpu}, 9.5},
		{"inf-norm", math.Inf(1), 12, []device.Device{cpu}, 6},
		{"-inf-norm", math.Inf(-1), 3, []device.Device{cpu}, 1.5},
		{"3-norm", 3, math.Cbrt(27 + 64 + 1728), []device.Device{cpu}, 5},
		{"two devices", 0, 13, []device.Device{cpu, sim}, 6.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			ps := withGrads(t, c.devs, dtype.F32, []float32{3, -4}, []float32{12})
			s := tensor.NewScope()
			total := nn.ClipGradNorm(s, ps, c.maxArg, nn.ClipOptions{NormType: c.p})
			require.Same(t, c.devs[0], total.Device())
			require.InDelta(t, c.total, total.Item(), 1e-5*c.total)
			k := c.maxArg / (c.total + 1e-6)
			got := gradsOf(ps)
			require.InDeltaSlice(t, []float64{3 * k, -4 * k}, f64s(got[0]), 1e-5)
			require.InDeltaSlice(t, []float64{12 * k}, f64s(got[1]), 1e-5)

			// Under the limit the gradients stay as they are (the factor is clamped at 1).
			again := nn.ClipGradNorm(s, ps, 100, nn.ClipOptions{NormType: c.p})
			require.InDelta(t, c.maxArg, again.Item(), 1e-4*c.maxArg, "the clipped norm is the limit")
			require.Equal(t, got, gradsOf(ps))
			s.Close()
			releaseParams(ps)
			for _, d := range c.devs {
				requireEmpty(t, d)
			}
		})
	}
}

func f64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// Nothing is read back: ClipGradNorm runs on the meta device, where any read panics,
// and leaves the parameters, their gradients and the norm; asking for the finiteness
// check is the one read.
func TestClipGradNormReadsNothingBack(t *testing.T) {
	d := tensortest.Sim(t, 1<<30, false) // without data, whatever SUBLET_TEST_META says: a read fails there
	m := nn.NewMLP(nn.Init{Device: d, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: []int{256, 512, 10}})
	s := tensor.NewScope()
	x := s.Zeros(d, dtype.F32, 32, 256)
	y := m.Forward(x)
	loss := y.Sum()
	loss.Backward()
	total := nn.ClipGradNorm(s, nn.Parameters(m), 1)
	requireLive(t, d, "after clipping", cat(paramSizes(m), paramSizes(m), tensortest.Sizes(x, y, loss, total))...)
	err := tensor.Try(func() { nn.ClipGradNorm(s, nn.Parameters(m), 1, nn.ClipOptions{ErrorIfNonfinite: true}) })
	require.ErrorIs(t, err, tensor.ErrNoData, "the check is a read")
	nn.ClipGradValue(nn.Parameters(m), 0.5)
	s.Close()
	m.Release()
	requireEmpty(t, d)
}

func TestClipGradNormHalfAndNonFinite(t *testing.T) {
	d := newCPU(t)
	// 300² overflows float16 (65504): the norm is taken in F32.
	ps := withGrads(t, []device.Device{d}, dtype.F16, []float32{300, 400})
	s := tensor.NewScope()
	total := nn.ClipGradNorm(s, ps, 1000, nn.ClipOptions{})
	require.Equal(t, dtype.F32, total.DType())
	require.InDelta(t, 500, total.Item(), 1e-3)
	releaseParams(ps)

	ps = withGrads(t, []device.Device{d}, dtype.F32, []float32{1, float32(math.Inf(1))}, []float32{2})
	err := tensor.Try(func() { nn.ClipGradNorm(s, ps, 1, nn.ClipOptions{ErrorIfNonfinite: true}) })
	require.ErrorIs(t, err, nn.ErrNonFiniteNorm)
	require.Contains(t, err.Error(), "+Inf")
	require.Equal(t, [][]float32{{1, float32(math.Inf(1))}, {2}}, gradsOf(ps), "the gradients are left as they were")
	for _, bad := range []func(){
		func() { nn.ClipGradNorm(s, nil, 1) },
		func() { nn.ClipGradNorm(s, ps, 1, nn.ClipOptions{}, nn.ClipOptions{}) },
		func() { nn.ClipGradNorm(s, ps, -1, nn.ClipOptions{}) },
		func() { nn.ClipGradNorm(s, ps, 1, nn.ClipOptions{NormType: -2}) },
		func() { nn.ClipGradValue(ps, math.NaN()) },
	} {
		require.ErrorIs(t, tensor.Try(bad), tensor.ErrShape)
	}
	releaseParams(ps)

	ps = withGrads(t, []device.Device{d}, dtype.F32, []float32{1})
	ps[0].ZeroGrad(true)
	require.Equal(t, float64(0), nn.ClipGradNorm(s, ps, 1).Item(), "no gradient: norm 0")
	s.Close()
	releaseParams(ps)
	requireEmpty(t, d)
}

func TestClipGradValue(t *testing.T) {
	d := newCPU(t)
	ps := withGrads(t, []device.Device{d}, dtype.F32, []float32{-3, 0.25, 2, float32(math.NaN())}, []float32{0.5})
	nn.ClipGradValue(ps, 1)
	got := gradsOf(ps)
	require.Equal(t, []float32{-1, 0.25, 1}, got[0][:3])
	require.True(t, math.IsNaN(float64(got[0][3])), "NaN stays NaN, as in torch.clamp")
	require.Equal(t, []float32{0.5}, got[1])
	releaseParams(ps)
	requireEmpty(t, d)
}
