package optim_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// TestLifetimeHints: a model's parameters reach the allocator as parameters and Adam's
// moments as optimizer state (what the planned policy keeps apart); a step's tensors
// carry no hint.
func TestLifetimeHints(t *testing.T) {
	d := tensortest.Sim(t, 1<<30, true)
	a, err := alloc.ForConfig(d, alloc.Config{Policy: alloc.PolicyPlanned})
	require.NoError(t, err)
	require.NoError(t, a.RecordHistory(alloc.HistoryOptions{}))
	m := nn.NewMLP(nn.Init{Device: d, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: []int{8, 16, 4}})
	opt, err := optim.NewAdam(nn.Parameters(m))
	require.NoError(t, err)
	s := tensor.NewScope()
	loss := m.Forward(s.Ones(d, dtype.F32, 2, 8)).Sum()
	loss.Backward()
	opt.Step()
	counts := map[alloc.Lifetime]int{}
	for _, seg := range a.Snapshot() {
		for _, b := range seg.Blocks {
			if b.State == alloc.ActiveAllocated {
				counts[b.Tag.Lifetime]++
			}
		}
	}
	params := len(nn.Parameters(m))
	assert.Equal(t, params, counts[alloc.LifetimeParameter], "the parameters")
	assert.Equal(t, 2*params, counts[alloc.LifetimeOptimizerState], "two moments each")
	assert.NotZero(t, counts[alloc.LifetimeUnknown], "the step's tensors and the gradients")
	s.Close()
	opt.ZeroGrad(true)
	opt.Release()
	m.Release()
	tensortest.RequireEmpty(t, d)
}
