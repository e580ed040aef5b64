package main

import (
	"math"

	"github.com/subletml/sublet/checkpoint"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
)

// residual is a block h + α·ReLU(Linear(h)), with α = 1/√depth so that the sum of
// the branches keeps the activations' scale through a deep stack. Recorded, it saves
// two activations: its input (for the Linear's weight gradient) and the ReLU's output.
type residual struct {
	lin   *nn.Linear
	alpha float64
}

func (r residual) Forward(x *tensor.Tensor) *tensor.Tensor {
	return x.Add(r.lin.Forward(x).Relu().MulScalar(r.alpha))
}

// model is a stack of residual blocks and a classification head.
type model struct {
	blocks []residual
	head   *nn.Linear
}

func newModel(init nn.Init, depth, width, classes int) *model {
	m := &model{}
	alpha := 1 / math.Sqrt(float64(depth))
	for range depth {
		m.blocks = append(m.blocks, residual{nn.NewLinear(init, width, width, true), alpha})
	}
	m.head = nn.NewLinear(init, width, classes, true)
	return m
}

// layers lists the blocks and the head, in order: what checkpoint.Sequential splits.
func (m *model) layers() []checkpoint.Layer {
	ls := make([]checkpoint.Layer, 0, len(m.blocks)+1)
	for _, b := range m.blocks {
		ls = append(ls, b)
	}
	return append(ls, m.head)
}

func (m *model) params() []*tensor.Tensor {
	var ps []*tensor.Tensor
	for _, b := range m.blocks {
		ps = append(ps, nn.Parameters(b.lin)...)
	}
	return append(ps, nn.Parameters(m.head)...)
}

func (m *model) release() {
	for _, p := range m.params() {
		p.Release()
	}
}
