package optim

import (
	"fmt"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/tensor"
)

// AdamConfig holds torch.optim.Adam's (and AdamW's) hyper-parameters.
type AdamConfig struct {
	LR           float64
	Beta1, Beta2 float64
	Eps          float64
	WeightDecay  float64
	// Capturable keeps the group's learning rate and its parameters' step counts in
	// tensors on the parameters' device (PyTorch's Adam(capturable=True)), so that a
	// step recorded by tensor.CaptureGraph replays with the count and the rate of the
	// moment it replays: the bias corrections are computed on the device, with the
	// bits the host's give, and SetLR (a scheduler's Step) writes the rate there,
	// where the next replay reads it. Without it a capture of Step fails with
	// tensor.ErrCapture. A capturable group's parameters are on one device; the
	// tensors are made on its first Step (not inside a capture: warm up first), 8
	// bytes for the rate and 8 per parameter, and the counts are exact to 2^53.
	Capturable bool
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
// tensors), or for a Capturable group on the device, with its learning rate.
type Adam struct {
	groups    []AdamConfig
	decoupled bool
	// steps counts each parameter's updates; a Capturable group's counts are its
	// device tensors' while they exist (these are then stale).
	steps []int
	onDev []adamDevice // per group; zero until a Capturable group's first Step
	// lists are Step's per-group lists, kept empty between steps so that a step
	// grows none; used by Step alone.
	lists []adamList
	params
}

// adamList is one group's multi-tensor step.
type adamList struct {
	k          kernels.Adam
	steps      []int // the host's counts, or a Capturable group's slots
	p, g, m, v []*tensor.Tensor
}

// empty clears l for the next step, keeping its room and no tensor.
func (l *adamList) empty() {
	for _, ts := range [][]*tensor.Tensor{l.p, l.g, l.m, l.v} {
		clear(ts)
	}
	l.steps, l.p, l.g, l.m, l.v = l.steps[:0], l.p[:0], l.g[:0], l.m[:0], l.v[:0]
}

// adamDevice is a Capturable group's learning rate (one F64 element) and its
// parameters' step counts (F64, one per parameter of the group, in its order), on
// their device: optimizer state, owned by the optimizer.
type adamDevice struct{ lr, steps *tensor.Tensor }

func (d *adamDevice) release() {
	if d.lr != nil {
		d.lr.Release()
		d.steps.Release()
	}
	*d = adamDevice{}
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
	if err := checkCapturable(g.Capturable, g.Params); err != nil {
		return fmt.Errorf("optim: %s: group %d: %w", o.op, o.NumGroups(), err)
	}
	if err := o.add(g.Params); err != nil {
		return err
	}
	o.groups = append(o.groups, g.AdamConfig)
	o.onDev = append(o.onDev, adamDevice{})
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
	if err := checkCapturable(c.Capturable, o.GroupParams(i)); err != nil {
		return fmt.Errorf("optim: %s: group %d: %w", o.op, i, err)
	}
	if !c.Capturable {
		if err := tensor.Try(func() { o.countsToHost(i) }); err != nil {
			return fmt.Errorf("optim: %s: group %d: reading the step counts back: %w", o.op, i, err)
		}
	}
	o.groups[i] = c
	o.setDeviceLR(i)
	return nil
}

// checkCapturable returns an error when a capturable group's parameters are on
// several devices: its rate and counts live on one.
func checkCapturable(capturable bool, ps []*tensor.Tensor) error {
	if !capturable {
		return nil
	}
	for _, p := range ps {
		if p != nil && ps[0] != nil && p.Device() != ps[0].Device() {
			return fmt.Errorf("a Capturable group keeps its step counts on one device; its parameters are on %s and %s: "+
				"put them in one group per device", ps[0].Device().Name(), p.Device().Name())
		}
	}
	return nil
}

// countsToHost copies group i's step counts from its device tensors to steps and
// releases the tensors (a group that stops being Capturable, or loads a state).
func (o *Adam) countsToHost(i int) {
	d := &o.onDev[i]
	if d.steps == nil {
		return
	}
	counts := tensor.ToSlice[float64](d.steps)
	for k, j := range o.groupIndices(i) {
		o.steps[j] = int(counts[k])
	}
	d.release()
}

// setDeviceLR writes group i's learning rate into its device tensor, if it has one:
// a kernel ordered after the work before it, so a replay after it reads the new rate.
func (o *Adam) setDeviceLR(i int) {
	if d := o.onDev[i]; d.lr != nil {
		d.lr.Fill(o.groups[i].LR)
	}
}

// deviceState returns Capturable group i's rate and counts, made from the host's on
// its first Step; made inside a capture they would be made again by every replay, so
// that fails with ErrCapture.
func (o *Adam) deviceState(i int, dev device.Device) adamDevice {
	d := &o.onDev[i]
	if d.lr != nil {
		return *d
	}
	if tensor.Capturing(dev) {
		panic(&tensor.Error{Op: o.op + ".Step", Err: tensor.ErrCapture,
			Msg: fmt.Sprintf("group %d's first Capturable step makes its step counts, which a graph would make again each replay; "+
				"take a step eagerly before the capture (warm-up)", i)})
	}
	idx := o.groupIndices(i)
	counts := make([]float64, len(idx))
	for k, j := range idx {
		counts[k] = float64(o.steps[j])
	}
	s := tensor.NewScope(tensor.NoGrad(), tensor.WithLifetime(alloc.LifetimeOptimizerState))
	defer s.Close()
	d.lr, d.steps = s.Full(dev, dtype.F64, o.groups[i].LR), tensor.FromSlice(s, dev, dtype.F64, counts)
	s.Keep(d.lr)
	s.Keep(d.steps)
	return *d
}

// LR is the learning rate of group i.
func (o *Adam) LR(i int) float64 {
	checkGroup(o.op+".LR", i, len(o.groups))
	return o.groups[i].LR
}

// SetLR sets the learning rate of group i.
func (o *Adam) SetLR(i int, lr float64) {
	o.groups[i].LR = checkLR(o.op+".SetLR", i, len(o.groups), lr)
	o.setDeviceLR(i)
}

// Step updates every parameter that has a gradient. A Capturable group's step can be
// recorded by tensor.CaptureGraph once every parameter that steps has its state (a step
// taken eagerly before); another group's fails the capture with tensor.ErrCapture.
func (o *Adam) Step() {
	o.checkStateBeforeCapture()
	// One multi-tensor step per group: a launch per group on a GPU.
	if len(o.lists) < len(o.groups) {
		o.lists = append(o.lists, make([]adamList, len(o.groups)-len(o.lists))...)
	}
	lists := o.lists[:len(o.groups)]
	for i, c := range o.groups {
		lists[i].k = kernels.Adam{LR: c.LR, Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, WeightDecay: c.WeightDecay, Decoupled: o.decoupled}
	}
	defer func() {
		for i := range lists {
			lists[i].empty()
		}
	}()
	o.each(func(int) int { return 2 }, func(i, g int, p, grad *tensor.Tensor, st []*tensor.Tensor, _ bool) {
		n := o.index(i)
		if !o.groups[g].Capturable {
			o.steps[i]++
			n = o.steps[i]
		}
		l := &lists[g]
		l.steps, l.p, l.g, l.m, l.v = append(l.steps, n), append(l.p, p), append(l.g, grad), append(l.m, st[0]), append(l.v, st[1])
	})
	for g := range lists {
		l := &lists[g]
		switch {
		case len(l.p) == 0:
		case o.groups[g].Capturable:
			d := o.deviceState(g, l.p[0].Device())
			tensor.StepAdamMultiCapturable(l.k, d.lr, d.steps, l.steps, l.p, l.g, l.m, l.v)
		default:
			tensor.StepAdamMulti(l.k, l.steps, l.p, l.g, l.m, l.v)
		}
	}
}

// checkStateBeforeCapture fails with ErrCapture when a parameter would get its state
// (zeroed moments) inside a graph capture: every replay would zero it again.
func (o *Adam) checkStateBeforeCapture() {
	for i, p := range o.params.params {
		if o.state != nil && o.state[i] == nil && p.Grad() != nil && tensor.Capturing(p.Device()) {
			panic(&tensor.Error{Op: o.op + ".Step", Err: tensor.ErrCapture,
				Msg: fmt.Sprintf("parameter %d's first step makes its moments, which a graph would zero again each replay; "+
					"take a step eagerly before the capture (warm-up)", i)})
		}
	}
}

// StateBytes is the moments' bytes plus, for Capturable groups, the rate and counts.
func (o *Adam) StateBytes() int64 {
	n := o.params.StateBytes()
	for _, d := range o.onDev {
		if d.lr != nil {
			n += d.lr.Bytes() + d.steps.Bytes()
		}
	}
	return n
}

// Release releases the state, the Capturable groups' rates and counts included.
func (o *Adam) Release() {
	for i := range o.onDev {
		o.onDev[i].release()
	}
	o.params.Release()
}
