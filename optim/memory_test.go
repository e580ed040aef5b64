package optim_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// model is an MLP with ReLU on a batch size, on a device made by dev.
type model struct {
	name  string
	dev   func(testing.TB) device.Device
	batch int
	sizes []int
}

// models are one at full size on the meta device (memory only) and one small with
// real data on the CPU.
var models = []model{
	{"meta/full", tensortest.Meta, 512, []int{1024, 4096, 4096, 1000}},
	{"cpu/small", tensortest.CPU, 8, []int{5, 16, 16, 3}},
}

// optimizers make each optimizer under test and say how many state tensors it keeps
// per parameter.
var optimizers = []struct {
	name     string
	perParam int
	make     func([]*tensor.Tensor) (optim.Optimizer, error)
}{
	{"sgd", 0, func(ps []*tensor.Tensor) (optim.Optimizer, error) {
		return optim.NewSGD(ps, optim.SGDConfig{LR: 0.05})
	}},
	{"sgd momentum", 1, func(ps []*tensor.Tensor) (optim.Optimizer, error) {
		return optim.NewSGD(ps, optim.SGDConfig{LR: 0.05, Momentum: 0.9, Nesterov: true})
	}},
	{"adam", 2, func(ps []*tensor.Tensor) (optim.Optimizer, error) { return optim.NewAdam(ps, optim.DefaultAdam()) }},
	{"adamw", 2, func(ps []*tensor.Tensor) (optim.Optimizer, error) { return optim.NewAdamW(ps, optim.DefaultAdamW()) }},
}

// inputs makes inputs and labels of a fixed pattern in s.
func sum(sizes []int64) int64 {
	var n int64
	for _, s := range sizes {
		n += s
	}
	return n
}

func (m model) inputs(s *tensor.Scope, d device.Device, k int) (x, labels *tensor.Tensor) {
	in, out := m.sizes[0], m.sizes[len(m.sizes)-1]
	xs := make([]float32, m.batch*in)
	for i := range xs {
		xs[i] = float32(math.Sin(float64(i + 31*k)))
	}
	ls := make([]int64, m.batch)
	for i := range ls {
		ls[i] = int64((i + k) % out)
	}
	return tensor.FromSlice(s, d, dtype.F32, xs, m.batch, in), tensor.FromSlice(s, d, dtype.I64, ls)
}

// TestTrainingStepMemory: with every optimizer, at each named moment of a training
// step the allocator holds exactly: after the step's scope closes, parameters +
// gradients (+ state after the first step); after Step, parameters + gradients +
// state, which is made on the first step only; after ZeroGrad(true), parameters +
// state; after ZeroGrad(false), parameters + zeroed gradients + state. Step itself
// allocates nothing but the lazy state.
func TestTrainingStepMemory(t *testing.T) {
	for _, mc := range models {
		for _, oc := range optimizers {
			t.Run(fmt.Sprintf("%s/%s", mc.name, oc.name), func(t *testing.T) {
				d := mc.dev(t)
				a := tensortest.Allocator(t, d)
				m := nn.NewMLP(nn.Init{Device: d, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: mc.sizes})
				params := tensortest.Sizes(nn.Parameters(m)...)
				o, err := oc.make(nn.Parameters(m))
				require.NoError(t, err)
				tensortest.RequireLive(t, d, "after building", params...)
				var state []int64 // a state tensor per parameter, perParam times
				for range oc.perParam {
					state = slices.Concat(state, params)
				}
				stateBytes := int64(oc.perParam) * nn.ParameterBytes(m)

				for step := range 3 {
					s := tensor.NewScope()
					x, labels := mc.inputs(s, d, step)
					loss := nn.CrossEntropyLoss{}.Loss(m.Forward(x), labels)
					loss.Backward()
					s.Close()
					var had []int64 // state made by earlier steps
					if step > 0 {
						had = state
					}
					tensortest.RequireLive(t, d, fmt.Sprintf("step %d: after the step's scope closed: parameters, gradients", step),
						slices.Concat(params, params, had)...)

					a.ResetPeakStats()
					before := a.Stats().RequestedBytes[alloc.StatAll].Current
					o.Step()
					tensortest.RequireLive(t, d, fmt.Sprintf("step %d: after Step: parameters, gradients, state", step),
						slices.Concat(params, params, state)...)
					require.Equal(t, stateBytes, o.StateBytes())
					require.Equal(t, before+sum(state)-sum(had), a.Stats().RequestedBytes[alloc.StatAll].Peak,
						"Step allocates nothing but the lazy state")

					if step == 1 {
						o.ZeroGrad(false)
						tensortest.RequireLive(t, d, "after ZeroGrad(false)", slices.Concat(params, params, state)...)
						if d.Name() == "cpu" {
							for _, p := range o.Params() {
								for _, v := range vals(p.Grad()) {
									require.Zero(t, v)
								}
							}
						}
					}
					o.ZeroGrad(true)
					tensortest.RequireLive(t, d, fmt.Sprintf("step %d: after ZeroGrad(true): parameters, state", step), slices.Concat(params, state)...)
					assert.Zero(t, nn.GradBytes(m))
				}
				o.Release()
				tensortest.RequireLive(t, d, "after releasing the optimizer", params...)
				m.Release()
				tensortest.RequireEmpty(t, d)
			})
		}
	}
}
