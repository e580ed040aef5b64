package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// What a scope WithLifetime makes reaches the allocator with the hint (its memory
// history shows it), children inherit it, other scopes' tensors carry none.
func TestWithLifetimeHintsTheAllocator(t *testing.T) {
	d := newSim(t, 0, false)
	a, err := alloc.ForConfig(d, alloc.Config{Policy: alloc.PolicyPlanned})
	require.NoError(t, err)
	require.NoError(t, a.RecordHistory(alloc.HistoryOptions{}))
	params := tensor.NewScope(tensor.NoGrad(), tensor.WithLifetime(alloc.LifetimeParameter))
	w := params.Zeros(d, dtype.F32, 256, 1024)
	v := params.Child().Zeros(d, dtype.F32, 1024)
	step := tensor.NewScope()
	x := step.Zeros(d, dtype.F32, 256, 1024)
	lifetimes := map[uintptr]alloc.Lifetime{}
	for _, seg := range a.Snapshot() {
		for _, b := range seg.Blocks {
			if b.State == alloc.ActiveAllocated {
				lifetimes[uintptr(b.Address)] = b.Tag.Lifetime
			}
		}
	}
	require.Equal(t, alloc.LifetimeParameter, lifetimes[uintptr(w.Storage().Ptr())])
	require.Equal(t, alloc.LifetimeParameter, lifetimes[uintptr(v.Storage().Ptr())])
	require.Equal(t, alloc.LifetimeUnknown, lifetimes[uintptr(x.Storage().Ptr())])
	step.Close()
	params.Close()
	require.Zero(t, a.Stats().AllocatedBytes[alloc.StatAll].Current)
}
