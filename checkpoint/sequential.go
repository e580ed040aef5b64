package checkpoint

import (
	"errors"
	"fmt"

	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
)

// Layer is what Sequential needs of a layer: nn's modules are layers.
type Layer interface {
	// Forward computes the layer on x, which a scope owns; the result belongs where an
	// op on x puts it.
	Forward(x *tensor.Tensor) *tensor.Tensor
}

// LayerFunc makes a function a Layer.
type LayerFunc func(x *tensor.Tensor) *tensor.Tensor

// Forward calls f.
func (f LayerFunc) Forward(x *tensor.Tensor) *tensor.Tensor { return f(x) }

// Segment is a run of layers, layers[Start:End], and whether Sequential checkpoints it.
type Segment struct {
	Start, End   int
	Checkpointed bool
}

// ErrSegments is wrapped by the error for a segment count Segments cannot split by.
var ErrSegments = errors.New("bad segment count")

// Segments splits n layers into k segments as PyTorch's checkpoint_sequential does:
// each of the first k−1 holds ⌊n/k⌋ layers and is checkpointed; the last one holds the
// rest (n − (k−1)·⌊n/k⌋ layers, the remainder included) and is not, so that its
// activations are there when backward starts. k must be in [1, n].
func Segments(n, k int) ([]Segment, error) {
	if n < 1 || k < 1 || k > n {
		return nil, fmt.Errorf("checkpoint: %w: %d segments of %d layers; ask for 1 to %d segments", ErrSegments, k, n, max(n, 1))
	}
	size := n / k
	segs := make([]Segment, 0, k)
	start := 0
	for ; start < size*(k-1); start += size {
		segs = append(segs, Segment{Start: start, End: start + size, Checkpointed: true})
	}
	return append(segs, Segment{Start: start, End: n}), nil
}

const opSequential = "checkpoint.Sequential"

// Stack is what Sequential splits into segments: an *nn.Sequential, whose children
// are the layers, in order (PyTorch's checkpoint_sequential takes an nn.Sequential),
// or a list of layers.
type Stack interface {
	*nn.Sequential | []Layer
}

// layersOf lists the layers of a stack.
func layersOf[S Stack](stack S) []Layer {
	switch st := any(stack).(type) {
	case *nn.Sequential:
		if st == nil {
			return nil
		}
		ls := make([]Layer, len(st.Children))
		for i, c := range st.Children {
			ls[i] = c
		}
		return ls
	case []Layer:
		return st
	}
	return nil
}

// Sequential runs the layers of stack on x split into k segments with the zero
// Config; see SequentialWith.
func Sequential[S Stack](stack S, k int, x *tensor.Tensor) *tensor.Tensor {
	return SequentialWith(Config{}, stack, k, x)
}

// SequentialWith runs the layers of stack one after the other on x (which a scope
// owns), the first k−1 segments of Segments(len(layers), k) each under one Checkpoint
// with c, the last one plainly. Each layer runs in a child scope and each intermediate
// result is released once the next layer consumed it, so after a recorded forward the
// memory held is the parameters, the inputs of the checkpointed segments, the
// activations the last segment saved and the result (owned where an op on x puts it). It panics
// with a *tensor.Error wrapping ErrSegments for a k outside [1, len(layers)]. (It is a
// function, not a method of Config, because a Go method cannot take a type parameter.)
func SequentialWith[S Stack](c Config, stack S, k int, x *tensor.Tensor) *tensor.Tensor {
	layers := layersOf(stack)
	segs, err := Segments(len(layers), k)
	if err != nil {
		panic(&tensor.Error{Op: opSequential, Msg: "splitting the layers", Err: err})
	}
	return tensor.Layer(x, func(h *tensor.Tensor) *tensor.Tensor {
		var made *frame // the frame of the checkpointed segment that computed h, if any
		for _, sg := range segs {
			run := layers[sg.Start:sg.End]
			var next *tensor.Tensor
			var f *frame
			if sg.Checkpointed {
				var out []*tensor.Tensor
				out, f = c.checkpoint(func(in []*tensor.Tensor) []*tensor.Tensor {
					return []*tensor.Tensor{forward(run, in[0])}
				}, []*tensor.Tensor{h})
				next = out[0]
			} else {
				next = forward(run, h)
			}
			if made != nil && heldUntilBackward(h, next, sg.Checkpointed) {
				made.keepResult(h)
			}
			h.Release()
			h, made = next, f
		}
		return h
	})
}

// heldUntilBackward reports whether the segment that took h as its input (and computed
// next from it) holds h until its backward is over, which comes just before that of the
// segment that computed h: as its checkpoint's input, or as a tensor one of its ops
// saved (h's storage has other handles than h once the segment's temporaries are gone,
// and is not the segment's result). The segment that computed h may then keep it for
// its recomputation at no cost in memory.
func heldUntilBackward(h, next *tensor.Tensor, checkpointed bool) bool {
	return checkpointed || h.Storage().Refs() > 1 && next.Storage() != h.Storage()
}

// forward runs layers on x, each in a child scope (a Linear and the ReLU after it in
// one, as one op: nn.Fold, as nn.Sequential runs them), releasing each intermediate
// result once the next layer consumed it. The result belongs where an op on x puts it;
// x is untouched.
func forward(layers []Layer, x *tensor.Tensor) *tensor.Tensor {
	h := x
	for i := 0; i < len(layers); {
		f, n := nn.Fold(layers[i:])
		next := tensor.Layer(h, f)
		if h != x {
			h.Release()
		}
		h = next
		i += n
	}
	return h
}
