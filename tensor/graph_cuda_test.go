package tensor_test

import (
	"fmt"
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

// graphModel is an MLP with its optimizer and a batch resident on the device.
type graphModel struct {
	model *nn.Sequential
	opt   optim.Optimizer
	data  *tensor.Scope
	x, y  *tensor.Tensor
}

// sgdGraph is the optimizer of TestGraphReplayMatchesEagerSteps.
func sgdGraph(ps []*tensor.Tensor) (optim.Optimizer, error) {
	return optim.NewSGD(ps, optim.SGDConfig{LR: 0.05, Momentum: 0.9})
}

func newGraphModel(t *testing.T, d device.Device, newOpt func([]*tensor.Tensor) (optim.Optimizer, error)) *graphModel {
	m := &graphModel{model: nn.NewMLP(nn.Init{Device: d, Gen: tensor.NewGenerator(7)}, nn.MLPConfig{Sizes: []int{32, 64, 64, 10}})}
	var err error
	m.opt, err = newOpt(nn.Parameters(m.model))
	require.NoError(t, err)
	m.data = tensor.NewScope()
	x := make([]float32, 16*32)
	for i := range x {
		x[i] = float32(i%13)/13 - 0.5
	}
	y := make([]int64, 16)
	for i := range y {
		y[i] = int64(i % 10)
	}
	m.x, m.y = tensor.FromSlice(m.data, d, dtype.F32, x, 16, 32), tensor.FromSlice(m.data, d, dtype.I64, y, 16)
	return m
}

// step records one training step in s and returns its loss, kept in s: forward, loss,
// backward, the optimizer's step and the gradients set to none.
func (m *graphModel) step(s *tensor.Scope) *tensor.Tensor {
	c := s.Child()
	defer c.Close()
	loss := nn.CrossEntropyLoss{}.Loss(m.model.Forward(c.Bind(m.x)), c.Bind(m.y))
	loss.Backward()
	m.opt.Step()
	m.opt.ZeroGrad(true)
	return c.Keep(loss)
}

// params returns every parameter's values, read back from the device.
func (m *graphModel) params() [][]float32 {
	var out [][]float32
	for _, p := range nn.Parameters(m.model) {
		out = append(out, tensor.ToSlice[float32](p))
	}
	return out
}

func (m *graphModel) release() {
	m.data.Close()
	m.opt.Release()
	m.model.Release()
}

// TestGraphReplayMatchesEagerSteps (GPU): a training step captured once and replayed
// five times gives the losses and parameters of five eager steps bit for bit, and a
// replay allocates nothing; then everything goes back.
func TestGraphReplayMatchesEagerSteps(t *testing.T) {
	d := tensortest.CUDA(t)
	al := allocator(t, d)
	eager, graphed := newGraphModel(t, d, sgdGraph), newGraphModel(t, d, sgdGraph)
	losses := func(m *graphModel, steps int, run func(s *tensor.Scope) *tensor.Tensor) []float64 {
		var out []float64
		for range steps {
			s := tensor.NewScope()
			out = append(out, run(s).Item())
			s.Close()
		}
		return out
	}
	warm := func(m *graphModel) []float64 { return losses(m, 3, m.step) }
	require.Equal(t, warm(eager), warm(graphed))
	want := losses(eager, 5, eager.step)

	outs := tensor.NewScope()
	var loss *tensor.Tensor
	g, err := tensor.CaptureGraph(d, func() { loss = graphed.step(outs) })
	require.NoError(t, err)
	before := al.Stats()
	got := make([]float64, 0, 5)
	for range 5 {
		require.NoError(t, g.Replay())
		got = append(got, loss.Item())
	}
	after := al.Stats()
	assert.Equal(t, want, got, "losses of replayed and eager steps")
	assert.Equal(t, eager.params(), graphed.params(), "parameters after the steps")
	assert.Equal(t, before.Allocation[alloc.StatAll].Allocated, after.Allocation[alloc.StatAll].Allocated, "replays allocated")
	assert.Equal(t, before.NumDeviceAlloc, after.NumDeviceAlloc, "replays took device memory")
	assert.NotEqual(t, want[0], want[4], "the steps did not train")

	require.Error(t, tensor.ReleaseBackend(d), "the graph addresses the backend's memory")
	require.NoError(t, g.Release())
	outs.Close()
	eager.release()
	graphed.release()
	require.NoError(t, tensor.ReleaseBackend(d))
	require.NoError(t, al.EmptyCache())
	requireEmpty(t, d)
}

// TestGraphReplayMatchesEagerAdam (GPU): a Capturable Adam's and AdamW's training step
// captured once and replayed gives, replay after replay, the losses and parameters of
// as many eager steps of the same optimizer bit for bit: the step counts and the bias
// corrections advance on the device. A scheduler's rate change between replays reaches
// the replays as it reaches the eager steps. The eager Capturable steps match a
// host-counted optimizer's bit for bit too (TestCaptureRefusals: a host-counted
// Adam's step cannot be captured).
func TestGraphReplayMatchesEagerAdam(t *testing.T) {
	d := tensortest.CUDA(t)
	al := allocator(t, d)
	for _, decoupled := range []bool{false, true} {
		t.Run(fmt.Sprintf("decoupled=%v", decoupled), func(t *testing.T) {
			adam := func(capturable bool) func([]*tensor.Tensor) (optim.Optimizer, error) {
				return func(ps []*tensor.Tensor) (optim.Optimizer, error) {
					c := optim.DefaultAdam()
					if decoupled {
						c = optim.DefaultAdamW()
					}
					c.LR, c.Capturable = 1e-2, capturable
					if decoupled {
						return optim.NewAdamW(ps, c)
					}
					return optim.NewAdam(ps, c)
				}
			}
			host, eager, graphed := newGraphModel(t, d, adam(false)), newGraphModel(t, d, adam(true)), newGraphModel(t, d, adam(true))
			run := func(m *graphModel, step func(s *tensor.Scope) *tensor.Tensor) float64 {
				s := tensor.NewScope()
				defer s.Close()
				return step(s).Item()
			}
			for range 3 {
				l := run(host, host.step)
				require.Equal(t, l, run(eager, eager.step))
				require.Equal(t, l, run(graphed, graphed.step))
			}
			outs := tensor.NewScope()
			var loss *tensor.Tensor
			g, err := tensor.CaptureGraph(d, func() { loss = graphed.step(outs) })
			require.NoError(t, err)
			var replayAllocs int64 // allocations the replays make: none
			for n := range 8 {
				if n == 4 { // a scheduler's step
					for _, m := range []*graphModel{host, eager, graphed} {
						m.opt.SetLR(0, 2.5e-3)
					}
				}
				want := run(eager, eager.step)
				require.Equal(t, want, run(host, host.step), "step %d: host-counted and Capturable eager losses", n)
				before := al.Stats().Allocation[alloc.StatAll].Allocated
				require.NoError(t, g.Replay())
				replayAllocs += al.Stats().Allocation[alloc.StatAll].Allocated - before
				require.Equal(t, want, loss.Item(), "step %d: replayed and eager losses", n)
			}
			assert.Equal(t, eager.params(), graphed.params(), "parameters after the replays")
			assert.Equal(t, host.params(), eager.params(), "parameters of the host-counted and Capturable eager steps")
			assert.Zero(t, replayAllocs, "replays allocated")

			require.NoError(t, g.Release())
			outs.Close()
			for _, m := range []*graphModel{host, eager, graphed} {
				m.release()
			}
		})
	}
	require.NoError(t, tensor.ReleaseBackend(d))
	require.NoError(t, al.EmptyCache())
	requireEmpty(t, d)
}
