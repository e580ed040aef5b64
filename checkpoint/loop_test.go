package checkpoint_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/checkpoint"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// Checkpointing in the natural loop: the step scope (the data scope's only open child)
// owns what Checkpoint and Sequential return, and their child scopes open under it, so
// after each of 10 steps memory is exactly the data, the parameters and their
// gradients.
func TestCheckpointInAStepScope(t *testing.T) {
	d := tensortest.CPU(t)
	m := linears(d, 4, 8, 1)
	defer m.Release()
	data := newScope(2)
	x := input(data, d, 2, 8)
	flat := x.Bytes() + 2*nn.ParameterBytes(m) + x.Bytes()
	for i := range 10 {
		step := data.Child()
		y := checkpoint.Sequential(layersOf(m), 2, x)
		require.Same(t, step, y.Scope(), "step %d", i)
		z := checkpoint.Checkpoint((*tensor.Tensor).Tanh, y)
		require.Same(t, step, z.Scope())
		z.Sum().Backward()
		step.Close()
		require.Equal(t, flat, tensortest.Requested(t, d), "step %d: the data and its gradient, the parameters and theirs", i)
	}
	data.Close()
	m.Release()
	tensortest.RequireEmpty(t, d)
}
