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

// Recording an op of two inputs that saves two values allocates the node and the two
// Saved handles, and freeing it allocates nothing: the node has room for its inputs
// and saved values, and Release walks the freed producers without a heap stack.
func TestRecordingAllocatesOnlyTheNodeAndItsSaved(t *testing.T) {
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
	require.Equal(t, 3.0, n, "heap objects per recorded op")
	require.NoError(t, leaf.Release())
}
