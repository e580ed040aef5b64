package tensor_test

import (
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

// graphModel is an MLP with its SGD optimizer and a batch resident on the device.
type graphModel struct {
	model *nn.Sequential
	opt   *optim.SGD
	data  *tensor.Scope
	x, y  *tensor.Tensor
}

func newGraphModel(t *testing.T, d device.Device) *graphModel {
	m := &graphModel{model: nn.NewMLP(nn.Init{Device: d, Gen: tensor.NewGenerator(7)}, nn.MLPConfig{Sizes: []int{32, 64, 64, 10}})}
	var err error
	m.opt, err = optim.NewSGD(nn.Parameters(m.model), optim.SGDConfig{LR: 0.05, Momentum: 0.9})
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
	eager, graphed := newGraphModel(t, d), newGraphModel(t, d)
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
