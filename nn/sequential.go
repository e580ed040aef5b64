package nn

import (
	"fmt"
	"strconv"

	"github.com/subletml/sublet/tensor"
)

// Sequential runs its children one after the other (torch.nn.Sequential), each in a
// child scope (tensor.Layer), releasing each intermediate result once the next child
// has consumed it: only what the graph saved outlives a layer. A *Linear followed by
// ReLU runs as one layer, one op (tensor.LinearActivation, through Fold): the same
// values, saved tensors and gradients as the two, the ReLU folded into the product
// where the backend can (cuBLASLt's epilogue on cuda, the built-in GEMM's blocks on
// cpu). GELU is not folded (cuBLASLt's GELU epilogue measured slower than the two ops:
// kernels/cuda's MatmulActivation).
type Sequential struct {
	Children []Module
}

// NewSequential returns a Sequential of children, named "0", "1", … in order.
func NewSequential(children ...Module) *Sequential {
	return &Sequential{Children: children}
}

// Forward runs the children on x in order and returns the last one's result, owned
// where an op on x puts it (each child's scope opens there).
func (s *Sequential) Forward(x *tensor.Tensor) *tensor.Tensor {
	return tensor.Layer(x, func(h *tensor.Tensor) *tensor.Tensor {
		for i := 0; i < len(s.Children); {
			f, n := Fold(s.Children[i:])
			next := tensor.Layer(h, f)
			h.Release()
			h = next
			i += n
		}
		return h
	})
}

// Fold returns the forward of the first of layers (each a *Linear, an activation or
// anything else with a Forward method) and how many layers it runs: a *Linear followed
// by ReLU is one op (tensor.LinearActivation, 2 layers), as Sequential runs them; any
// other layer is its own Forward (1). Anything that runs a stack of layers runs them
// this way (checkpoint's Sequential does), so that a stack computes the same ops
// whichever runs it. It panics when layers is empty.
func Fold[L interface {
	Forward(*tensor.Tensor) *tensor.Tensor
}](layers []L) (forward func(*tensor.Tensor) *tensor.Tensor, n int) {
	if l, ok := any(layers[0]).(*Linear); ok && len(layers) > 1 {
		if a, ok := any(layers[1]).(foldable); ok {
			act := a.folds()
			return func(x *tensor.Tensor) *tensor.Tensor { return l.ForwardActivation(x, act) }, 2
		}
	}
	return layers[0].Forward, 1
}

// NamedParameters returns the children's parameters, prefixed by the child's index.
func (s *Sequential) NamedParameters() []Parameter {
	var ps []Parameter
	for i, c := range s.Children {
		ps = append(ps, prefixed(strconv.Itoa(i), c.NamedParameters())...)
	}
	return ps
}

// SetTraining sets the mode of every child.
func (s *Sequential) SetTraining(on bool) {
	for _, c := range s.Children {
		c.SetTraining(on)
	}
}

// Release releases every child's parameters.
func (s *Sequential) Release() {
	for _, c := range s.Children {
		c.Release()
	}
}

// MLPConfig describes a multilayer perceptron.
type MLPConfig struct {
	// Sizes are the input features, the hidden widths and the outputs (at least two).
	Sizes []int
	// Activation makes the layer after each hidden Linear; nil means ReLU.
	Activation func() Module
	// Dropout, when above 0, adds a Dropout of that probability after each activation.
	Dropout float64
}

// NewMLP returns a Sequential of Linear layers (with biases) between consecutive
// Sizes, each hidden one followed by the activation and, when configured, Dropout;
// the last Linear has neither (it gives logits). Layers are drawn from init.Gen in
// order.
func NewMLP(init Init, c MLPConfig) *Sequential {
	if len(c.Sizes) < 2 {
		panic(&tensor.Error{Op: "nn.NewMLP", Msg: fmt.Sprintf("sizes %v: need the input and output sizes at least", c.Sizes)})
	}
	act := c.Activation
	if act == nil {
		act = func() Module { return ReLU{} }
	}
	return construct(&Sequential{}, func(s *Sequential) {
		for i := 1; i < len(c.Sizes); i++ {
			s.Children = append(s.Children, NewLinear(init, c.Sizes[i-1], c.Sizes[i], true))
			if i == len(c.Sizes)-1 {
				break
			}
			s.Children = append(s.Children, act())
			if c.Dropout > 0 {
				s.Children = append(s.Children, NewDropout(c.Dropout))
			}
		}
	})
}
