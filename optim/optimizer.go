package optim

import (
	"fmt"

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
	// Params returns the parameters, in the order the optimizer was given them.
	Params() []*tensor.Tensor
	// StateBytes is the device memory the optimizer's state holds now.
	StateBytes() int64
	// Release releases the state; the optimizer cannot step afterwards. Releasing
	// again does nothing.
	Release()
}

// group is what every optimizer keeps: its parameters and their state tensors.
type group struct {
	op       string           // the optimizer's name, for errors
	params   []*tensor.Tensor // set at construction, never changed
	state    [][]*tensor.Tensor
	released bool
}

// newGroup checks params: F32 or F64 leaves that require grad, each given once.
func newGroup(op string, params []*tensor.Tensor) (group, error) {
	if len(params) == 0 {
		return group{}, fmt.Errorf("optim: %s: an empty parameter list; pass the module's parameters (nn.Parameters)", op)
	}
	seen := make(map[*tensor.Tensor]int, len(params))
	for i, p := range params {
		switch {
		case p == nil:
			return group{}, fmt.Errorf("optim: %s: parameter %d is nil", op, i)
		case p.Released():
			return group{}, fmt.Errorf("optim: %s: parameter %d was released", op, i)
		case !p.IsLeaf() || !p.RequiresGrad():
			return group{}, fmt.Errorf("optim: %s: parameter %d (%v) is not a leaf that requires grad; make it with AsParameter", op, i, p.Shape())
		case p.DType() != dtype.F32 && p.DType() != dtype.F64 || !p.IsContiguous():
			return group{}, fmt.Errorf("optim: %s: parameter %d is %v with strides %v; optimizers take contiguous F32 or F64 parameters (keep F32 master weights under autocast)", op, i, p.DType(), p.Strides())
		}
		if j, dup := seen[p]; dup {
			return group{}, fmt.Errorf("optim: %s: parameters %d and %d are the same tensor", op, j, i)
		}
		seen[p] = i
	}
	return group{op: op, params: append([]*tensor.Tensor(nil), params...), state: make([][]*tensor.Tensor, len(params))}, nil
}

// Params returns the parameters.
func (g *group) Params() []*tensor.Tensor { return append([]*tensor.Tensor(nil), g.params...) }

// ZeroGrad drops or zeroes every parameter's gradient.
func (g *group) ZeroGrad(setToNone bool) {
	for _, p := range g.params {
		p.ZeroGrad(setToNone)
	}
}

// StateBytes sums the sizes of the state tensors.
func (g *group) StateBytes() int64 {
	var n int64
	for _, st := range g.state {
		for _, t := range st {
			n += t.Bytes()
		}
	}
	return n
}

// Release releases the state tensors.
func (g *group) Release() {
	for _, st := range g.state {
		for _, t := range st {
			t.Release()
		}
	}
	g.state, g.released = nil, true
}

// each calls update for every parameter that has a gradient, with the parameter, its
// gradient and its n state tensors (made zero on the parameter's first update; first
// tells). update runs one of tensor's fused steps.
func (g *group) each(n int, update func(i int, p, grad *tensor.Tensor, state []*tensor.Tensor, first bool)) {
	if g.released {
		panic(&tensor.Error{Op: g.op + ".Step", Msg: "the optimizer was released", Err: tensor.ErrReleased})
	}
	for i, p := range g.params {
		grad := p.Grad()
		if grad == nil {
			continue
		}
		first := g.state[i] == nil
		if first {
			g.state[i] = zerosLike(p, n)
		}
		update(i, p, grad, g.state[i], first)
	}
}

// zerosLike makes n zero tensors of p's shape, type and device, owned by the caller.
func zerosLike(p *tensor.Tensor, n int) []*tensor.Tensor {
	s := tensor.NewScope(tensor.NoGrad())
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
