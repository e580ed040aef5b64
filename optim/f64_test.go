package optim_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// grads64 is gradsAt in float64, with parts float32 cannot hold.
func grads64(k, n int) []float64 {
	g := make([]float64, n)
	for i := range g {
		g[i] = math.Sin(float64(7*k+3*i+1))*float64(1+i%3) + 1e-10*float64(i)
	}
	return g
}

// Optimizers step F64 parameters in float64, with F64 state: five steps of every
// configuration agree with PyTorch's update in float64 to float64 precision (an update
// through float32 would be off by 1e-7), and the state takes 8 bytes per element.
func TestF64ParametersStepInFloat64(t *testing.T) {
	d := tensortest.CPU(t)
	start := []float64{0.5, -1.25, 2, 0.01, -0.3, 1 + 1e-12}
	const steps = 5
	for _, c := range []optim.SGDConfig{
		{LR: 0.05},
		{LR: 0.05, Momentum: 0.9},
		{LR: 0.05, Momentum: 0.8, Dampening: 0.3, WeightDecay: 0.01},
		{LR: 0.05, Momentum: 0.9, Nesterov: true, WeightDecay: 0.1},
	} {
		t.Run(fmt.Sprintf("sgd %+v", c), func(t *testing.T) {
			p := paramOf(d, dtype.F64, start)
			o, err := optim.NewSGD([]*tensor.Tensor{p}, c)
			require.NoError(t, err)
			ref, buf := append([]float64(nil), start...), make([]float64, len(start))
			for k := range steps {
				g := grads64(k, len(start))
				setGrad(d, p, g...)
				o.Step()
				refSGD(c, ref, buf, g, k == 0)
				assert.InDeltaSlice(t, ref, tensor.ToSlice[float64](p), 1e-15, "step %d", k+1)
			}
			if c.Momentum != 0 {
				assert.Equal(t, int64(8*len(start)), o.StateBytes(), "an F64 momentum buffer")
			}
			o.Release()
			p.Release()
		})
	}
	for _, c := range []optim.AdamConfig{
		optim.DefaultAdam(),
		{LR: 0.01, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, WeightDecay: 0.05},
	} {
		for _, decoupled := range []bool{false, true} {
			t.Run(fmt.Sprintf("adam decoupled=%v %+v", decoupled, c), func(t *testing.T) {
				p := paramOf(d, dtype.F64, start)
				newOpt := optim.NewAdam
				if decoupled {
					newOpt = optim.NewAdamW
				}
				o, err := newOpt([]*tensor.Tensor{p}, c)
				require.NoError(t, err)
				ref := append([]float64(nil), start...)
				m, v := make([]float64, len(start)), make([]float64, len(start))
				for k := range steps {
					g := grads64(k, len(start))
					setGrad(d, p, g...)
					o.Step()
					refAdam(c, decoupled, k+1, ref, m, v, g)
					assert.InDeltaSlice(t, ref, tensor.ToSlice[float64](p), 1e-14, "step %d", k+1)
				}
				assert.Equal(t, int64(2*8*len(start)), o.StateBytes(), "F64 moments")
				tensortest.RequireLive(t, d, "after the steps: p, its gradient, m and v", 48, 48, 48, 48)
				o.Release()
				p.Release()
			})
		}
	}
	tensortest.RequireEmpty(t, d)
}

// F32 and F64 parameters can share an optimizer; each steps in its own type. A
// parameter of another type is refused by name.
func TestMixedF32AndF64Parameters(t *testing.T) {
	d := tensortest.CPU(t)
	a, b := param(d, 1, 2), paramOf(d, dtype.F64, []float64{1, 2})
	o, err := optim.NewAdam([]*tensor.Tensor{a, b}, optim.DefaultAdam())
	require.NoError(t, err)
	setGrad(d, a, 0.5, -0.5)
	setGrad(d, b, 0.5, -0.5)
	o.Step()
	assert.Equal(t, int64(2*2*4+2*2*8), o.StateBytes())
	assert.InDeltaSlice(t, tensor.ToSlice[float64](b), widen(vals(a)), 1e-7, "the same step, in each type")
	o.Release()

	s := tensor.NewScope()
	h := tensor.FromSlice(s, d, dtype.F16, []float32{1}).Detach().SetRequiresGrad(true)
	_, err = optim.NewSGD([]*tensor.Tensor{h}, optim.SGDConfig{LR: 1})
	assert.ErrorContains(t, err, "optimizers take contiguous F32 or F64 parameters")
	s.Close()
	a.Release()
	b.Release()
	tensortest.RequireEmpty(t, d)
}

// An F64 model trains in float64 end to end (nn layers of Init.DType F64, Adam on F64
// parameters): from the F32 model's initial values its losses follow the F32 model's
// to float32's precision and fall, and after each step the allocator holds exactly
// the F64 parameters, gradients and moments.
func TestF64ModelTrains(t *testing.T) {
	d := tensortest.CPU(t)
	const n, dim, k = 48, 4, 3
	x32, labels := blobs(7, n, dim, k)
	cfg := nn.MLPConfig{Sizes: []int{dim, 16, k}}
	m32 := nn.NewMLP(nn.Init{Device: d, Gen: tensor.NewGenerator(7)}, cfg)
	m64 := nn.NewMLP(nn.Init{Device: d, DType: dtype.F64, Gen: tensor.NewGenerator(7)}, cfg)
	for i, p := range nn.Parameters(m64) {
		p.CopyFrom(nn.Parameters(m32)[i])
	}
	run := func(m nn.Module, dt dtype.DType) []float64 {
		o, err := optim.NewAdam(nn.Parameters(m), optim.AdamConfig{LR: 0.02, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
		require.NoError(t, err)
		params := tensortest.Sizes(nn.Parameters(m)...)
		other := tensortest.Sizes(nn.Parameters(m32)...)
		if dt == dtype.F32 {
			other = tensortest.Sizes(nn.Parameters(m64)...)
		}
		var losses []float64
		for range 8 {
			s := tensor.NewScope()
			x := tensor.FromSlice(s, d, dtype.F32, x32, n, dim).Cast(dt)
			loss := nn.CrossEntropyLoss{}.Loss(m.Forward(x), tensor.FromSlice(s, d, dtype.I64, labels))
			require.Equal(t, dt, loss.DType())
			loss.Backward()
			losses = append(losses, loss.Item())
			s.Close()
			o.Step()
			tensortest.RequireLive(t, d, "after a step: parameters, gradients, two moments each (and the other model)",
				slices.Concat(params, params, params, params, other)...)
			o.ZeroGrad(true)
		}
		o.Release()
		return losses
	}
	l64, l32 := run(m64, dtype.F64), run(m32, dtype.F32)
	assert.InDeltaSlice(t, l32, l64, 1e-4, "the same training in either precision")
	assert.Less(t, l64[len(l64)-1], l64[0], "the loss falls")
	assert.Equal(t, 8*nn.ParameterBytes(m32)/4, nn.ParameterBytes(m64), "8 bytes per element")
	m32.Release()
	m64.Release()
	tensortest.RequireEmpty(t, d)
}
