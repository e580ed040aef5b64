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

// AdamWConfig is AdamConfig under AdamW's name: AdamW has Adam's hyper-parameters.
type AdamWConfig = AdamConfig

// DefaultAdam is torch.optim.Adam's default configuration.
func DefaultAdam() AdamConfig { return AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8} }

// DefaultAdamW is torch.optim.AdamW's default configuration (weight decay 0.01).
func DefaultAdamW() AdamConfig {
	c := DefaultAdam()
	c.WeightDecay = 1e-2
	return c
}

// check names the first bad hyper-parameter.
func (c AdamConfig) check() error {
	switch {
	case !(c.LR >= 0):
		return fmt.Errorf("learning rate %g: need LR ≥ 0", c.LR)
	case !(c.Beta1 >= 0 && c.Beta1 < 1) || !(c.Beta2 >= 0 && c.Beta2 < 1):
		return fmt.Errorf("betas (%g, %g): each must be in [0, 1) (PyTorch's defaults are 0.9, 0.999)", c.Beta1, c.Beta2)
	case !(c.Eps >= 0):
		return fmt.Errorf("eps %g: need Eps ≥ 0", c.Eps)
	case c.Beta1 == 0 && c.Beta2 == 0 && c.Eps == 0:
		// Valid for PyTorch, and never meant: a zero gradient divides 0 by 0.
		return fmt.Errorf("betas (0, 0) and eps 0: set only some fields? Start from DefaultAdam() or DefaultAdamW() " +
			"and change them, or pass no configuration for the defaults")
	case !(c.WeightDecay >= 0):
		return fmt.Errorf("weight decay %g: need WeightDecay ≥ 0", c.WeightDecay)
	}
	return nil
}

// AdamGroup is a parameter group of Adam or AdamW (an entry of PyTorch's
// param_groups): the parameters and the hyper-parameters they step with.
type AdamGroup struct {
	Params []*tensor.Tensor
	AdamConfig
}

// Adam is Adam (torch.optim.Adam) or, made by NewAdamW, AdamW. For each parameter p
// with gradient g, at its step t (counted per parameter, from 1), with the
// hyper-parameters of p's group:
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
	groups    []AdamConfig
	decoupled bool
	steps     []int // per parameter
	params
}

// NewAdam returns an Adam optimizer over params, all in one group, configured by c
// (without c, DefaultAdam: torch.optim.Adam(params)), or an error naming a bad
// hyper-parameter or parameter.
func NewAdam(params []*tensor.Tensor, c ...AdamConfig) (*Adam, error) {
	g, err := oneGroup("Adam", params, DefaultAdam(), c)
	if err != nil {
		return nil, err
	}
	return NewAdamGroups(g)
}

// NewAdamW returns an AdamW optimizer (decoupled weight decay) over params, all in one
// group, configured by c (without c, DefaultAdamW: torch.optim.AdamW(params)).
func NewAdamW(params []*tensor.Tensor, c ...AdamWConfig) (*Adam, error) {
	g, err := oneGroup("AdamW", params, DefaultAdamW(), c)
	if err != nil {
		return nil, err
	}
	return NewAdamWGroups(g)
}

// oneGroup is the group of params with the configuration given, or def when none is.
func oneGroup(op string, params []*tensor.Tensor, def AdamConfig, given []AdamConfig) (AdamGroup, error) {
	switch len(given) {
	case 0:
		return AdamGroup{Params: params, AdamConfig: def}, nil
	case 1:
		return AdamGroup{Params: params, AdamConfig: given[0]}, nil
	}
	return AdamGroup{}, fmt.Errorf("optim: %s: %d configurations; pass one, or none for PyTorch's defaults", op, len(given))
}

// NewAdamGroups returns an Adam optimizer over parameter groups, each with its own
// hyper-parameters (PyTorch's Adam(param_groups)).
func NewAdamGroups(groups ...AdamGroup) (*Adam, error) { return newAdam("Adam", false, groups) }

// NewAdamWGroups returns an AdamW optimizer over parameter groups.
func NewAdamWGroups(groups ...AdamGroup) (*Adam, error) { return newAdam("AdamW", true, groups) }

func newAdam(op string, decoupled bool, groups []AdamGroup) (*Adam, error) {
	if len(groups) == 0 {
		return nil, fmt.Errorf("optim: %s: no parameter groups; pass the module's parameters (nn.Parameters)", op)
	}
	o := &Adam{decoupled: decoupled, params: params{op: op}}
	for _, g := range groups {
		if err := o.AddGroup(g); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// AddGroup adds a parameter group (PyTorch's add_param_group), for parameters the
// optimizer does not have yet.
func (o *Adam) AddGroup(g AdamGroup) error {
	if err := g.check(); err != nil {
		return fmt.Errorf("optim: %s: group %d: %w", o.op, o.NumGroups(), err)
	}
	if err := o.add(g.Params); err != nil {
		return err
	}
	o.groups = append(o.groups, g.AdamConfig)
	o.steps = append(o.steps, make([]int, len(g.Params))...)
	o.addedGroup(g.LR)
	return nil
}

// Config returns the hyper-parameters of the first group.
func (o *Adam) Config() AdamConfig { return o.groups[0] }

// Group returns parameter group i.
func (o *Adam) Group(i int) AdamGroup {
	checkGroup(o.op+".Group", i, len(o.groups))
	return AdamGroup{Params: o.GroupParams(i), AdamConfig: o.groups[i]}
}

// SetGroupConfig changes the hyper-parameters of group i, or returns an error naming
// a bad one.
func (o *Adam) SetGroupConfig(i int, c AdamConfig) error {
	checkGroup(o.op+".SetGroupConfig", i, len(o.groups))
	if err := c.check(); err != nil {
		return fmt.Errorf("optim: %s: group %d: %w", o.op, i, err)
	}
	o.groups[i] = c
	return nil
}

// LR is the learning rate of group i.
func (o *Adam) LR(i int) float64 {
	checkGroup(o.op+".LR", i, len(o.groups))
	return o.groups[i].LR
}

// SetLR sets the learning rate of group i.
func (o *Adam) SetLR(i int, lr float64) {
	o.groups[i].LR = checkLR(o.op+".SetLR", i, len(o.groups), lr)
}

// Step updates every parameter that has a gradient.
func (o *Adam) Step() {
	ks := make([]kernels.Adam, len(o.groups))
	for i, c := range o.groups {
		ks[i] = kernels.Adam{LR: c.LR, Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, WeightDecay: c.WeightDecay, Decoupled: o.decoupled}
	}
	// One multi-tensor step per group: a launch per group on a GPU.
	type list struct {
		steps      []int
		p, g, m, v []*tensor.Tensor
	}
	lists := make([]list, len(ks))
	o.each(func(int) int { return 2 }, func(i, g int, p, grad *tensor.Tensor, st []*tensor.Tensor, _ bool) {
		o.steps[i]++
		l := &lists[g]
		l.steps, l.p, l.g, l.m, l.v = append(l.steps, o.steps[i]), append(l.p, p), append(l.g, grad), append(l.m, st[0]), append(l.v, st[1])
	})
	for g, l := range lists {
		if len(l.p) > 0 {
			tensor.StepAdamMulti(ks[g], l.steps, l.p, l.g, l.m, l.v)
		}
	}
}
