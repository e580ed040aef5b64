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

// check names the first bad hyper-parameter.
func (c SGDConfig) check() error {
	switch {
	case !(c.LR >= 0):
		return fmt.Errorf("learning rate %g: need LR ≥ 0", c.LR)
	case !(c.Momentum >= 0):
		return fmt.Errorf("momentum %g: need Momentum ≥ 0", c.Momentum)
	case !(c.WeightDecay >= 0):
		return fmt.Errorf("weight decay %g: need WeightDecay ≥ 0", c.WeightDecay)
	case c.Nesterov && (c.Momentum <= 0 || c.Dampening != 0):
		return fmt.Errorf("Nesterov momentum needs Momentum > 0 and Dampening 0 (have %g and %g)", c.Momentum, c.Dampening)
	}
	return nil
}

// SGDGroup is a parameter group of SGD (an entry of PyTorch's param_groups): the
// parameters and the hyper-parameters they step with.
type SGDGroup struct {
	Params []*tensor.Tensor
	SGDConfig
}

// SGD is stochastic gradient descent (torch.optim.SGD). For each parameter p with
// gradient g, at each step, with the hyper-parameters of p's group:
//
//	d = g + WeightDecay·p
//	with momentum: buf = d on the first step, else Momentum·buf + (1−Dampening)·d;
//	               d = d + Momentum·buf (Nesterov) or buf
//	p = p − LR·d
//
// Its state is one momentum buffer per parameter, only in groups whose Momentum is not
// 0 (a group that starts using momentum later gets its buffers then).
type SGD struct {
	groups []SGDConfig
	// lists are Step's per-group lists, kept empty between steps so that a step
	// grows none; used by Step alone.
	lists []sgdList
	params
}

// sgdList is one group's multi-tensor step.
type sgdList struct {
	k         kernels.SGD
	p, g, buf []*tensor.Tensor
	first     []bool
}

// empty clears l for the next step, keeping its room and no tensor.
func (l *sgdList) empty() {
	for _, ts := range [][]*tensor.Tensor{l.p, l.g, l.buf} {
		clear(ts)
	}
	l.p, l.g, l.buf, l.first = l.p[:0], l.g[:0], l.buf[:0], l.first[:0]
}

// NewSGD returns an SGD optimizer over params, all in one group, or an error naming a
// bad hyper-parameter or parameter.
func NewSGD(params []*tensor.Tensor, c SGDConfig) (*SGD, error) {
	return NewSGDGroups(SGDGroup{Params: params, SGDConfig: c})
}

// NewSGDGroups returns an SGD optimizer over parameter groups, each with its own
// hyper-parameters (PyTorch's SGD(param_groups)), or an error naming a bad
// hyper-parameter or parameter. A parameter belongs to one group.
func NewSGDGroups(groups ...SGDGroup) (*SGD, error) {
	o := &SGD{params: params{op: "SGD"}}
	if len(groups) == 0 {
		return nil, fmt.Errorf("optim: SGD: no parameter groups; pass the module's parameters (nn.Parameters)")
	}
	for _, g := range groups {
		if err := o.AddGroup(g); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// AddGroup adds a parameter group (PyTorch's add_param_group), for parameters the
// optimizer does not have yet: layers unfrozen while fine-tuning, say.
func (o *SGD) AddGroup(g SGDGroup) error {
	if err := g.check(); err != nil {
		return fmt.Errorf("optim: SGD: group %d: %w", o.NumGroups(), err)
	}
	if err := o.add(g.Params); err != nil {
		return err
	}
	o.groups = append(o.groups, g.SGDConfig)
	o.addedGroup(g.LR)
	return nil
}

// Config returns the hyper-parameters of the first group.
func (o *SGD) Config() SGDConfig { return o.groups[0] }

// Group returns parameter group i.
func (o *SGD) Group(i int) SGDGroup {
	checkGroup("SGD.Group", i, len(o.groups))
	return SGDGroup{Params: o.GroupParams(i), SGDConfig: o.groups[i]}
}

// SetGroupConfig changes the hyper-parameters of group i, or returns an error naming
// a bad one.
func (o *SGD) SetGroupConfig(i int, c SGDConfig) error {
	checkGroup("SGD.SetGroupConfig", i, len(o.groups))
	if err := c.check(); err != nil {
		return fmt.Errorf("optim: SGD: group %d: %w", i, err)
	}
	o.groups[i] = c
	return nil
}

// LR is the learning rate of group i.
func (o *SGD) LR(i int) float64 {
	checkGroup("SGD.LR", i, len(o.groups))
	return o.groups[i].LR
}

// SetLR sets the learning rate of group i.
func (o *SGD) SetLR(i int, lr float64) { o.groups[i].LR = checkLR("SGD.SetLR", i, len(o.groups), lr) }

// Step updates every parameter that has a gradient.
func (o *SGD) Step() {
	// One multi-tensor step per group: a launch per group on a GPU.
	if len(o.lists) < len(o.groups) {
		o.lists = append(o.lists, make([]sgdList, len(o.groups)-len(o.lists))...)
	}
	lists := o.lists[:len(o.groups)]
	for i, c := range o.groups {
		lists[i].k = kernels.SGD{LR: c.LR, Momentum: c.Momentum, Dampening: c.Dampening, WeightDecay: c.WeightDecay,
			Nesterov: c.Nesterov}
	}
	buffers := func(g int) int {
		if lists[g].k.Momentum != 0 {
			return 1
		}
		return 0
	}
	defer func() {
		for i := range lists {
			lists[i].empty()
		}
	}()
	o.each(buffers, func(_, g int, p, grad *tensor.Tensor, st []*tensor.Tensor, first bool) {
		l := &lists[g]
		l.p, l.g, l.first = append(l.p, p), append(l.g, grad), append(l.first, first)
		if st != nil {
			l.buf = append(l.buf, st[0])
		}
	})
	for g := range lists {
		if l := &lists[g]; len(l.p) > 0 {
			tensor.StepSGDMulti(l.k, l.p, l.g, l.buf, l.first)
		}
	}
}
