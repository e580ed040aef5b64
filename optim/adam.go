package optim

import (
	"fmt"

	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/tensor"
)

// AdamConfig holds torch.optim.Adam's (and AdamW's) hyper-parameters.
type AdamConfig struct {
	LR           float64
	Beta1, Beta2 float64
	Eps          float64
	WeightDecay  float64
}

// DefaultAdam is torch.optim.Adam's default configuration.
func DefaultAdam() AdamConfig { return AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8} }

// DefaultAdamW is torch.optim.AdamW's default configuration (weight decay 0.01).
func DefaultAdamW() AdamConfig {
	c := DefaultAdam()
	c.WeightDecay = 1e-2
	return c
}

// Adam is Adam (torch.optim.Adam) or, made by NewAdamW, AdamW. For each parameter p
// with gradient g, at its step t (counted per parameter, from 1):
//
//	Adam:  g = g + WeightDecay·p          AdamW: p = p·(1 − LR·WeightDecay)
//	m = Beta1·m + (1−Beta1)·g
//	v = Beta2·v + (1−Beta2)·g²
//	p = p − LR/(1−Beta1^t) · m / (√v/√(1−Beta2^t) + Eps)
//
// Its state is m and v per parameter: twice the parameters' bytes once every
// parameter has stepped. The step counts live on the host (PyTorch keeps them in CPU
// tensors).
type Adam struct {
	c         AdamConfig
	decoupled bool
	steps     []int // per parameter
	group
}

// NewAdam returns an Adam optimizer over params, or an error naming a bad
// hyper-parameter or parameter.
func NewAdam(params []*tensor.Tensor, c AdamConfig) (*Adam, error) {
	return newAdam("Adam", params, c, false)
}

// NewAdamW returns an AdamW optimizer (decoupled weight decay) over params.
func NewAdamW(params []*tensor.Tensor, c AdamConfig) (*Adam, error) {
	return newAdam("AdamW", params, c, true)
}

func newAdam(op string, params []*tensor.Tensor, c AdamConfig, decoupled bool) (*Adam, error) {
	switch {
	case !(c.LR >= 0):
		return nil, fmt.Errorf("optim: %s: learning rate %g: need LR ≥ 0", op, c.LR)
	case !(c.Beta1 >= 0 && c.Beta1 < 1) || !(c.Beta2 >= 0 && c.Beta2 < 1):
		return nil, fmt.Errorf("optim: %s: betas (%g, %g): each must be in [0, 1) (PyTorch's defaults are 0.9, 0.999)", op, c.Beta1, c.Beta2)
	case !(c.Eps >= 0):
		return nil, fmt.Errorf("optim: %s: eps %g: need Eps ≥ 0", op, c.Eps)
	case !(c.WeightDecay >= 0):
		return nil, fmt.Errorf("optim: %s: weight decay %g: need WeightDecay ≥ 0", op, c.WeightDecay)
	}
	g, err := newGroup(op, params)
	if err != nil {
		return nil, err
	}
	return &Adam{c: c, decoupled: decoupled, steps: make([]int, len(params)), group: g}, nil
}

// Config returns the hyper-parameters.
func (o *Adam) Config() AdamConfig { return o.c }

// Step updates every parameter that has a gradient.
func (o *Adam) Step() {
	k := kernels.Adam{LR: o.c.LR, Beta1: o.c.Beta1, Beta2: o.c.Beta2, Eps: o.c.Eps, WeightDecay: o.c.WeightDecay, Decoupled: o.decoupled}
	o.each(2, func(i int, p, g *tensor.Tensor, st []*tensor.Tensor, _ bool) {
		o.steps[i]++
		tensor.StepAdam(k, o.steps[i], p, g, st[0], st[1])
	})
}
