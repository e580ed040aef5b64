package optim_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// capturableRun is an Adam or AdamW over two groups of parameters (F32 and F64, one
// parameter without elements), host-counted or Capturable.
type capturableRun struct {
	ps  []*tensor.Tensor
	opt *optim.Adam
}

func newCapturableRun(t *testing.T, d device.Device, decoupled, capturable bool) *capturableRun {
	r := &capturableRun{ps: []*tensor.Tensor{
		param(d, 1, -2, 3, 0.5, 7), param(d, 0.25),
		paramOf(d, dtype.F64, []float64{2, -1, 0.125}), paramOf(d, dtype.F32, []float32{}),
	}}
	c0 := optim.AdamConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, Capturable: capturable}
	c1 := optim.AdamConfig{LR: 3e-3, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, Capturable: capturable}
	groups := []optim.AdamGroup{{Params: r.ps[:2], AdamConfig: c0}, {Params: r.ps[2:], AdamConfig: c1}}
	var err error
	if decoupled {
		r.opt, err = optim.NewAdamWGroups(groups...)
	} else {
		r.opt, err = optim.NewAdamGroups(groups...)
	}
	require.NoError(t, err)
	return r
}

// step gives the parameters gradients that depend on n (the second parameter none on
// odd steps, so its count falls behind the others') and steps.
func (r *capturableRun) step(d device.Device, n int) {
	for i, p := range r.ps {
		p.ZeroGrad(true)
		if i == 1 && n%2 == 1 {
			continue
		}
		g := make([]float64, p.Numel())
		for j := range g {
			g[j] = float64((n*7+j*3+i)%11)/4 - 1 // exact in float32
		}
		setGrad(d, p, g...)
	}
	r.opt.Step()
}

func (r *capturableRun) values() [][]float64 {
	var out [][]float64
	for _, p := range r.ps {
		if p.DType() == dtype.F64 {
			out = append(out, tensor.ToSlice[float64](p))
			continue
		}
		v := []float64{}
		for _, x := range vals(p) {
			v = append(v, float64(x))
		}
		out = append(out, v)
	}
	return out
}

// steps reads the step counts from the state dict.
func (r *capturableRun) steps() map[int]float64 {
	s := tensor.NewScope()
	defer s.Close()
	out := map[int]float64{}
	for i, st := range r.opt.StateDict(s).State {
		out[i] = st["step"].Item()
	}
	return out
}

func (r *capturableRun) release() {
	r.opt.Release()
	for _, p := range r.ps {
		p.Release()
	}
}

// TestCapturableMatchesHostCounts: a Capturable Adam and AdamW (the step counts and the
// rate in device tensors, the bias corrections computed by the kernel from them) step
// the parameters to the bits of the host-counted optimizer, through parameters that
// miss steps, learning rates a scheduler changes and a hyper-parameter change; the
// counts in the state dict agree, the state holds the rate and counts besides the
// moments, and everything goes back. On the CPU the capturable kernel is kernels/cpu's
// reference; a GPU runs tensor's TestGraphReplayMatchesEagerAdam.
func TestCapturableMatchesHostCounts(t *testing.T) {
	d := tensortest.CPU(t)
	for _, decoupled := range []bool{false, true} {
		t.Run(fmt.Sprintf("decoupled=%v", decoupled), func(t *testing.T) {
			host, dev := newCapturableRun(t, d, decoupled, false), newCapturableRun(t, d, decoupled, true)
			var scheds []*optim.LRScheduler
			for _, r := range []*capturableRun{host, dev} {
				s, err := optim.NewStepLR(r.opt, 3, 0.5)
				require.NoError(t, err)
				scheds = append(scheds, s)
			}
			for n := range 9 {
				host.step(d, n)
				dev.step(d, n)
				for _, s := range scheds {
					s.Step()
				}
				require.Equal(t, host.values(), dev.values(), "parameters after step %d", n+1)
			}
			assert.Equal(t, host.steps(), dev.steps(), "step counts")
			assert.Equal(t, map[int]float64{0: 9, 1: 5, 2: 9, 3: 9}, dev.steps(), "parameter 1 missed the odd steps; parameter 3 has no elements and steps")
			// The rate (8 bytes) and 2 counts for group 0, the rate and 2 counts for group 1.
			assert.Equal(t, host.opt.StateBytes()+8+16+8+16, dev.opt.StateBytes())

			// A group that stops being Capturable goes on from the device's counts.
			for _, r := range []*capturableRun{host, dev} {
				c := r.opt.Group(1).AdamConfig
				c.Capturable, c.Eps = false, 1e-7
				require.NoError(t, r.opt.SetGroupConfig(1, c))
				r.step(d, 9)
			}
			require.Equal(t, host.values(), dev.values(), "parameters after a host-counted step")
			assert.Equal(t, host.steps(), dev.steps(), "step counts")

			host.release()
			dev.release()
		})
	}
	tensortest.RequireEmpty(t, d)
}

// TestCapturableStateDict: a state dict carries the counts from a Capturable optimizer
// to a host-counted one and back, and both go on stepping alike.
func TestCapturableStateDict(t *testing.T) {
	d := tensortest.CPU(t)
	mk := func(capturable bool) *capturableRun {
		r := &capturableRun{ps: []*tensor.Tensor{param(d, 1, -2, 3), param(d, 0.5)}}
		var err error
		r.opt, err = optim.NewAdamW(r.ps, optim.AdamConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, Capturable: capturable})
		require.NoError(t, err)
		return r
	}
	host, dev := mk(false), mk(true)
	for n := range 3 {
		host.step(d, n)
		dev.step(d, n)
	}
	s := tensor.NewScope()
	hd, dd := host.opt.StateDict(s), dev.opt.StateDict(s)
	assert.Equal(t, true, dd.Groups[0]["capturable"])
	require.NoError(t, host.opt.LoadStateDict(withCapturable(dd, false)))
	require.NoError(t, dev.opt.LoadStateDict(withCapturable(hd, true)))
	s.Close()
	for n := 3; n < 6; n++ {
		host.step(d, n)
		dev.step(d, n)
		require.Equal(t, host.values(), dev.values(), "parameters after step %d", n+1)
	}
	assert.Equal(t, map[int]float64{0: 6, 1: 3}, dev.steps())
	host.release()
	dev.release()
	tensortest.RequireEmpty(t, d)
}

// withCapturable sets every group's capturable flag of d.
func withCapturable(d optim.StateDict, on bool) optim.StateDict {
	for _, g := range d.Groups {
		g["capturable"] = on
	}
	return d
}

// TestCapturableRefusals: a capture of a host-counted Adam's step, and of a Capturable
// one's first step (its state would be made by each replay), fail with ErrCapture where
// a device can capture; on the CPU the capture itself does. A Capturable group's
// parameters are on one device.
func TestCapturableRefusals(t *testing.T) {
	d := tensortest.CPU(t)
	p := param(d, 1, 2)
	opt, err := optim.NewAdam([]*tensor.Tensor{p}, optim.AdamConfig{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Capturable: true})
	require.NoError(t, err)
	_, err = tensor.CaptureGraph(d, func() { opt.Step() })
	require.True(t, errors.Is(err, tensor.ErrCapture), "%v", err)

	sim := tensortest.Sim(t, 64<<20, true)
	q := param(sim, 1)
	_, err = optim.NewAdam([]*tensor.Tensor{p, q}, optim.AdamConfig{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Capturable: true})
	require.ErrorContains(t, err, "a Capturable group keeps its step counts on one device")
	opt.Release()
	p.Release()
	q.Release()
	tensortest.RequireEmpty(t, d)
	tensortest.RequireEmpty(t, sim)
}
