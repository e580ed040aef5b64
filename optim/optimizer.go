package optim

import (
	"fmt"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// Optimizer updates parameters from their gradients. It is what a training loop and
// amp's GradScaler drive: the scaler unscales the gradients of Params, then calls
// Step unless it found an Inf or a NaN.
type Optimizer interface {
	// Step updates every parameter that has a gradient, in place.
	Step()
	// ZeroGrad drops the parameters' gradients (setToNone: their memory returns to the
	// allocator) or zeroes them in place.
	ZeroGrad(setToNone bool)
	// Params returns the parameters of every group, group after group, each in the
	// order the optimizer was given them.
	Params() []*tensor.Tensor
	// NumGroups is the number of parameter groups (PyTorch's len(param_groups)).
	NumGroups() int
	// GroupParams returns the parameters of group i.
	GroupParams(i int) []*tensor.Tensor
	// LR is the learning rate of group i; SetLR changes it (what schedulers do). Both
	// panic with a *tensor.Error for a group the optimizer does not have, SetLR for a
	// rate below 0 too.
	LR(i int) float64
	SetLR(i int, lr float64)
	// StateBytes is the device memory the optimizer's state holds now.
	StateBytes() int64
	// StateDict returns the state and the groups' hyper-parameters as PyTorch's
	// state_dict lays them out, its tensors owned by s; LoadStateDict replaces them
	// (see StateDict). Package safetensors saves and loads them.
	StateDict(s *tensor.Scope) StateDict
	LoadStateDict(d StateDict) error
	// Release releases the state; the optimizer cannot step afterwards. Releasing
	// again does nothing.
	Release()
}

// params is what every optimizer keeps: its parameters, in groups, and their state.
// An optimizer is used by one goroutine at a time; so are these fields.
type params struct {
	op      string           // the optimizer's name, for errors
	params  []*tensor.Tensor // every group's, group after group; grown by AddGroup only
	groupOf []int            // the group of each parameter
	groups  int              // how many groups
	state   [][]*tensor.Tensor
	// initialLR is each group's learning rate when the first scheduler was made
	// (PyTorch's initial_lr): what every scheduler of the optimizer starts from. nil
	// until then.
	initialLR []float64
	released  bool
}

// add appends a group of parameters after checking them.
func (g *params) add(ps []*tensor.Tensor) error {
	group := g.groups
	if len(ps) == 0 {
		return fmt.Errorf("optim: %s: group %d has an empty parameter list; pass the module's parameters (nn.Parameters)", g.op, group)
	}
	for i, p := range ps {
		switch {
		case p == nil:
			return fmt.Errorf("optim: %s: parameter %d of group %d is nil", g.op, i, group)
		case p.Released():
			return fmt.Errorf("optim: %s: parameter %d of group %d was released", g.op, i, group)
		case !p.IsLeaf() || !p.RequiresGrad():
			return fmt.Errorf("optim: %s: parameter %d of group %d (%v) is not a leaf that requires grad; make it with AsParameter", g.op, i, group, p.Shape())
		case p.DType() != dtype.F32 && p.DType() != dtype.F64 || !p.IsContiguous():
			return fmt.Errorf("optim: %s: parameter %d of group %d is %v with strides %v; optimizers take contiguous F32 or F64 parameters (keep F32 master weights under autocast)", g.op, i, group, p.DType(), p.Strides())
		}
		for j, q := range g.params {
			if q == p {
				return fmt.Errorf("optim: %s: parameter %d of group %d is already parameter %d of group %d; a parameter belongs to one group once", g.op, i, group, g.index(j), g.groupOf[j])
			}
		}
		for j, q := range ps[:i] {
			if q == p {
				return fmt.Errorf("optim: %s: parameters %d and %d of group %d are the same tensor", g.op, j, i, group)
			}
		}
	}
	g.params = append(g.params, ps...)
	for range ps {
		g.groupOf = append(g.groupOf, group)
	}
	g.state = append(g.state, make([][]*tensor.Tensor, len(ps))...)
	g.groups++
	return nil
}

// index is the position of parameter j in its group.
func (g *params) index(j int) int {
	k := 0
	for i := j - 1; i >= 0 && g.groupOf[i] == g.groupOf[j]; i-- {
		k++
	}
	return k
}

// Params returns the parameters of every group, group after group.
func (g *params) Params() []*tensor.Tensor { return append([]*tensor.Tensor(nil), g.params...) }

// NumGroups is the number of parameter groups.
func (g *params) NumGroups() int { return g.groups }

// GroupParams returns the parameters of group i.
func (g *params) GroupParams(i int) []*tensor.Tensor {
	checkGroup(g.op+".GroupParams", i, g.groups)
	var out []*tensor.Tensor
	for _, j := range g.groupIndices(i) {
		out = append(out, g.params[j])
	}
	return out
}

// groupIndices returns the indices (in params) of group i's parameters, in order.
func (g *params) groupIndices(i int) []int {
	var idx []int
	for j, gi := range g.groupOf {
		if gi == i {
			idx = append(idx, j)
		}
	}
	return idx
}

// ZeroGrad drops or zeroes every parameter's gradient.
func (g *params) ZeroGrad(setToNone bool) {
	for _, p := range g.params {
		p.ZeroGrad(setToNone)
	}
}

// StateBytes sums the sizes of the state tensors.
func (g *params) StateBytes() int64 {
	var n int64
	for _, st := range g.state {
		for _, t := range st {
			n += t.Bytes()
		}
	}
	return n
}

// Release releases the state tensors.
func (g *params) Release() {
	for _, st := range g.state {
		for _, t := range st {
			t.Release()
		}
	}
	g.state, g.released = nil, true
}

// each calls update for every parameter that has a gradient, with its index, its
// group, the parameter, its gradient and its state: n(group) tensors, made zero on the
// parameter's first update that needs them (first tells), nil when n is 0. update
// runs one of tensor's fused steps.
func (g *params) each(n func(group int) int, update func(i, group int, p, grad *tensor.Tensor, state []*tensor.Tensor, first bool)) {
	if g.released {
		panic(&tensor.Error{Op: g.op + ".Step", Msg: "the optimizer was released", Err: tensor.ErrReleased})
	}
	for i, p := range g.params {
		grad := p.Grad()
		if grad == nil {
			continue
		}
		group := g.groupOf[i]
		k := n(group)
		first := g.state[i] == nil
		if first && k > 0 {
			g.state[i] = zerosLike(p, k)
		}
		var st []*tensor.Tensor
		if k > 0 {
			st = g.state[i]
		}
		update(i, group, p, grad, st, first)
	}
}

// addedGroup records the learning rate of a group added after a scheduler was made as
// its initial one.
func (g *params) addedGroup(lr float64) {
	if g.initialLR != nil {
		g.initialLR = append(g.initialLR, lr)
	}
}

// checkLR returns lr after checking group i of n and lr for op.
func checkLR(op string, i, n int, lr float64) float64 {
	checkGroup(op, i, n)
	if !(lr >= 0) {
		panic(&tensor.Error{Op: op, Msg: fmt.Sprintf("learning rate %g for group %d: need a rate ≥ 0", lr, i), Err: tensor.ErrShape})
	}
	return lr
}

// checkGroup fails for a group index the optimizer does not have.
func checkGroup(op string, i, n int) {
	if i < 0 || i >= n {
		panic(&tensor.Error{Op: op, Msg: fmt.Sprintf("parameter group %d of %d", i, n), Err: tensor.ErrShape})
	}
}

// zerosLike makes n zero tensors of p's shape, type and device, owned by the caller:
// optimizer state, which the planned allocation policy keeps apart from a step's
// tensors.
func zerosLike(p *tensor.Tensor, n int) []*tensor.Tensor {
	s := tensor.NewScope(tensor.NoGrad(), tensor.WithLifetime(alloc.LifetimeOptimizerState))
	defer s.Close()
	out := make([]*tensor.Tensor, n)
	for k := range out {
		out[k] = s.Zeros(p.Device(), p.DType(), p.Shape()...)
	}
	for _, t := range out {
		s.Keep(t)
	}
	return out
}
