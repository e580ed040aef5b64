package autograd_test

import (
	"fmt"

	"github.com/subletml/sublet/autograd"
)

// num stands for a tensor handle: Release drops its reference.
type num struct{ x float64 }

func (*num) Release() {}

// mulBackward is Mul's backward rule; the tensor package writes one per op,
// beside the forward.
type mulBackward struct{ a, b *autograd.Saved }

func (f *mulBackward) Backward(c *autograd.Ctx, grads []autograd.Value) ([]autograd.Value, error) {
	g := grads[0].(*num).x
	out := make([]autograd.Value, 2)
	for i, other := range []*autograd.Saved{f.b, f.a} {
		if !c.NeedsGrad(i) {
			continue
		}
		v, err := other.Get(c) // borrowed until Backward returns
		if err != nil {
			return nil, err
		}
		out[i] = &num{g * v.(*num).x} // a new value the engine owns
	}
	return out, nil
}

// accumulate is a leaf's AccumulateGrad.
type accumulate struct{ grad float64 }

func (l *accumulate) Backward(_ *autograd.Ctx, grads []autograd.Value) ([]autograd.Value, error) {
	l.grad += grads[0].(*num).x
	return nil, nil
}

type sum struct{}

func (sum) Add(a, b autograd.Value) (autograd.Value, error) {
	a.(*num).x += b.(*num).x
	return a, nil
}

func (sum) HasNonFinite(autograd.Value) (bool, error) { return false, nil }

// A tensor op records a node with its inputs' edges, saves what its backward
// needs, and hands the node's reference to its output handle.
func Example() {
	var clock autograd.Clock
	leafA, leafB := &accumulate{}, &accumulate{}
	a, _ := autograd.NewNode(autograd.NodeSpec{Name: "AccumulateGrad", Kind: autograd.KindAccumulate, Seq: clock.Next(), Outputs: 1, Fn: leafA})
	b, _ := autograd.NewNode(autograd.NodeSpec{Name: "AccumulateGrad", Kind: autograd.KindAccumulate, Seq: clock.Next(), Outputs: 1, Fn: leafB})

	// y = a·b with a=3, b=4 (forward computed elsewhere).
	fn := &mulBackward{}
	y, err := autograd.NewNode(autograd.NodeSpec{Name: "Mul", Seq: clock.Next(),
		Inputs: []autograd.Edge{{Node: a}, {Node: b}}, Outputs: 1, Fn: fn})
	if err != nil {
		panic(err)
	}
	fn.a, _ = y.Save(&num{3}, nil) // the scope's saved hooks go here
	fn.b, _ = y.Save(&num{4}, nil)

	err = autograd.Backward([]autograd.Root{{Edge: autograd.Edge{Node: y}, Grad: &num{1}}}, autograd.Options{Arith: sum{}})
	fmt.Println(leafA.grad, leafB.grad, err)

	err = autograd.Backward([]autograd.Root{{Edge: autograd.Edge{Node: y}, Grad: &num{1}}}, autograd.Options{Arith: sum{}})
	fmt.Println(err != nil)

	// The output handle goes: y is freed, and its edges' references on the
	// leaves' accumulators with it.
	fmt.Println(y.Release(), y.Freed(), a.Refs())
	// Output:
	// 4 3 <nil>
	// true
	// <nil> true 1
}
