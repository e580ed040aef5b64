package autograd_test

import (
	"testing"

	"github.com/subletml/sublet/autograd"
)

// Engine overhead per node, with values that cost nothing to make or free.

type free struct{}

func (free) Release() {}

type passFn struct{}

// Backward returns one free per input, in the engine's room (Ctx.Outputs).
func (passFn) Backward(c *autograd.Ctx, _ []autograd.Value) ([]autograd.Value, error) {
	out := c.Outputs(c.Node().NumInputs())
	for i := range out {
		out[i] = free{}
	}
	return out, nil
}

type freeArith struct{}

func (freeArith) Add(a, _ autograd.Value) (autograd.Value, error) { return a, nil }
func (freeArith) HasNonFinite(autograd.Value) (bool, error)       { return false, nil }

// chain records a leaf and n ops, each using the previous value twice and
// saving one value.
func chain(b *testing.B, n int) (leaf, top *autograd.Node) {
	var clock autograd.Clock
	leaf, err := autograd.NewNode(autograd.NodeSpec{Name: "Leaf", Kind: autograd.KindAccumulate, Seq: clock.Next(), Outputs: 1, Fn: passFn{}})
	if err != nil {
		b.Fatal(err)
	}
	prev := leaf
	for i := range n {
		e := autograd.Edge{Node: prev}
		node, err := autograd.NewNode(autograd.NodeSpec{Name: "Op", Seq: clock.Next(), Inputs: []autograd.Edge{e, e}, Outputs: 1, Fn: passFn{}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := node.Save(free{}, nil); err != nil {
			b.Fatal(err)
		}
		if i > 0 {
			if err := prev.Release(); err != nil { // the previous value's handle goes
				b.Fatal(err)
			}
		}
		prev = node
	}
	return leaf, prev
}

func backwardOnce(b *testing.B, top *autograd.Node, retain bool) {
	err := autograd.Backward([]autograd.Root{{Edge: autograd.Edge{Node: top}, Grad: free{}}},
		autograd.Options{Arith: freeArith{}, RetainGraph: retain})
	if err != nil {
		b.Fatal(err)
	}
}

func BenchmarkBackwardRetainedChain1000(b *testing.B) {
	leaf, top := chain(b, 1000)
	for b.Loop() {
		backwardOnce(b, top, true)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/node")
	b.StopTimer()
	if err := top.Release(); err != nil {
		b.Fatal(err)
	}
	if err := leaf.Release(); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkRecordBackwardReleaseChain1000(b *testing.B) {
	for b.Loop() {
		leaf, top := chain(b, 1000)
		backwardOnce(b, top, false)
		if err := top.Release(); err != nil {
			b.Fatal(err)
		}
		if err := leaf.Release(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/node")
}
