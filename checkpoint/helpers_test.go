package checkpoint_test

import (
	"testing"

	"github.com/subletml/sublet/checkpoint"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

const mib = int64(1) << 20

// linears makes n nn.Linear(width→width) layers with biases, drawn from a generator
// seeded with seed, in an nn.Sequential.
func linears(dev device.Device, n, width int, seed uint64) *nn.Sequential {
	init := nn.Init{Device: dev, Gen: tensor.NewGenerator(seed)}
	m := nn.NewSequential()
	for range n {
		m.Children = append(m.Children, nn.NewLinear(init, width, width, true))
	}
	return m
}

// layersOf returns the children of m as checkpoint layers.
func layersOf(m *nn.Sequential) []checkpoint.Layer {
	ls := make([]checkpoint.Layer, len(m.Children))
	for i, c := range m.Children {
		ls[i] = c
	}
	return ls
}

// grads copies the parameters' gradients to the host.
func grads(m nn.Module) [][]float32 {
	ps := nn.Parameters(m)
	out := make([][]float32, len(ps))
	for i, p := range ps {
		out[i] = tensor.ToSlice[float32](p.Grad())
	}
	return out
}

// newScope is a recording scope drawing from a generator seeded with seed.
func newScope(seed uint64) *tensor.Scope {
	return tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(seed)))
}

// input is a [batch, width] F32 standard normal input of s that requires grad.
func input(s *tensor.Scope, dev device.Device, batch, width int) *tensor.Tensor {
	return s.Randn(dev, dtype.F32, batch, width).SetRequiresGrad(true)
}

// forward runs m on x: plainly (nn.Sequential's Forward) for k 0, else through
// c.Sequential with k segments.
func forward(m *nn.Sequential, c checkpoint.Config, k int, x *tensor.Tensor) *tensor.Tensor {
	if k == 0 {
		return m.Forward(x)
	}
	return checkpoint.SequentialWith(c, m, k, x)
}

// apply runs fn on x and returns its first result: plainly for c nil, else
// checkpointed with c.
func apply(c *checkpoint.Config, fn checkpoint.Func, x *tensor.Tensor) *tensor.Tensor {
	if c == nil {
		return fn([]*tensor.Tensor{x})[0]
	}
	return c.CheckpointN(fn, x)[0]
}

// finish closes s, releases m and asserts nothing is left on dev.
func finish(t testing.TB, dev device.Device, s *tensor.Scope, m nn.Module) {
	t.Helper()
	s.Close()
	m.Release()
	tensortest.RequireEmpty(t, dev)
}
