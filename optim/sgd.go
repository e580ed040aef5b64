package optim

import (
	"fmt"

	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/tensor"
)

// SGDConfig holds torch.optim.SGD's hyper-parameters.
type SGDConfig struct {
	LR          float64
	Momentum    float64
	Dampening   float64
	WeightDecay float64
	Nesterov    bool
}

// SGD is stochastic gradient descent (torch.optim.SGD). For each parameter p with
// gradient g, at each step:
//
//	d = g + WeightDecay·p
//	with momentum: buf = d on the first step, else Momentum·buf + (1−Dampening)·d;
//	               d = d + Momentum·buf (Nesterov) or buf
//	p = p − LR·d
//
// Its state is one momentum buffer per parameter, only when Momentum is not 0.
type SGD struct {
	c SGDConfig
	group
}

// NewSGD returns an SGD optimizer over params, or an error naming a bad
// hyper-parameter or parameter.
func NewSGD(params []*tensor.Tensor, c SGDConfig) (*SGD, error) {
	switch {
	case !(c.LR >= 0):
		return nil, fmt.Errorf("optim: SGD: learning rate %g: need LR ≥ 0", c.LR)
	case !(c.Momentum >= 0):
		return nil, fmt.Errorf("optim: SGD: momentum %g: need Momentum ≥ 0", c.Momentum)
	case !(c.WeightDecay >= 0):
		return nil, fmt.Errorf("optim: SGD: weight decay %g: need WeightDecay ≥ 0", c.WeightDecay)
	case c.Nesterov && (c.Momentum <= 0 || c.Dampening != 0):
		return nil, fmt.Errorf("optim: SGD: Nesterov momentum needs Momentum > 0 and Dampening 0 (have %g and %g)", c.Momentum, c.Dampening)
	}
	g, err := newGroup("SGD", params)
	if err != nil {
		return nil, err
	}
	return &SGD{c: c, group: g}, nil
}

// Config returns the hyper-parameters.
func (o *SGD) Config() SGDConfig { return o.c }

// Step updates every parameter that has a gradient.
func (o *SGD) Step() {
	k := kernels.SGD{LR: o.c.LR, Momentum: o.c.Momentum, Dampening: o.c.Dampening, WeightDecay: o.c.WeightDecay,
		Nesterov: o.c.Nesterov}
	n := 0
	if o.c.Momentum != 0 {
		n = 1
	}
	o.each(n, func(_ int, p, g *tensor.Tensor, st []*tensor.Tensor, first bool) {
		var buf *tensor.Tensor
		if n == 1 {
			buf = st[0]
		}
		tensor.StepSGD(k, p, g, buf, first)
	})
}
