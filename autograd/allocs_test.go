package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/autograd"
)

// none is a Value that holds nothing and a Function that computes nothing.
type none struct{}

func (none) Release() {}

func (none) Backward(*autograd.Ctx, []autograd.Value) ([]autograd.Value, error) { return nil, nil }

// Recording an op of two inputs that saves two values allocates the node alone, and
// freeing it allocates nothing: the node has room for its inputs and for its first two
// Saved handles, and Release walks the freed producers without a heap stack.
func TestRecordingAllocatesOnlyTheNode(t *testing.T) {
	clock := new(autograd.Clock)
	leaf, err := autograd.NewNode(autograd.NodeSpec{Name: "leaf", Kind: autograd.KindAccumulate, Seq: clock.Next(), Outputs: 1, Fn: none{}})
	require.NoError(t, err)
	inputs := []autograd.Edge{{Node: leaf}, {Node: leaf}}
	n := testing.AllocsPerRun(100, func() {
		node, err := autograd.NewNode(autograd.NodeSpec{Name: "mul", Seq: clock.Next(), Inputs: inputs, Outputs: 1, Fn: none{}})
		require.NoError(t, err)
		for range 2 {
			_, err = node.Save(none{}, nil)
			require.NoError(t, err)
		}
		require.NoError(t, node.Release())
	})
	require.Equal(t, 1.0, n, "heap objects per recorded op")
	require.NoError(t, leaf.Release())
}

// A backward through a graph the engine saw before allocates nothing: its map, tasks,
// gradient slots, ready queue and walk stack are a finished backward's, and the
// Functions return their gradients in its room (Ctx.Outputs): a training loop's
// backward leaves no garbage of the engine's own.
func TestBackwardAllocatesNothingOnceWarm(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops the engine's state at random under the race detector")
	}
	leaf, err := autograd.NewNode(autograd.NodeSpec{Name: "leaf", Kind: autograd.KindAccumulate, Outputs: 1, Fn: none{}})
	require.NoError(t, err)
	a, err := autograd.NewNode(autograd.NodeSpec{Name: "a", Seq: 1, Inputs: []autograd.Edge{{Node: leaf}}, Outputs: 1, Fn: passFn{}})
	require.NoError(t, err)
	b, err := autograd.NewNode(autograd.NodeSpec{Name: "b", Seq: 2, Inputs: []autograd.Edge{{Node: a}, {Node: leaf}}, Outputs: 1, Fn: passFn{}})
	require.NoError(t, err)
	roots := []autograd.Root{{Edge: autograd.Edge{Node: b}, Grad: none{}}}
	opts := autograd.Options{Arith: freeArith{}}
	n := testing.AllocsPerRun(100, func() { require.NoError(t, autograd.Backward(roots, opts)) })
	require.Zero(t, n, "heap objects per backward")
	for _, x := range []*autograd.Node{b, a, leaf} {
		require.NoError(t, x.Release())
	}
}
