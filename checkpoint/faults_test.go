package checkpoint_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/amp"
	"github.com/subletml/sublet/checkpoint"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// A checkpointed training step (plain, selective, under SaveOnCPU) that runs out of
// memory at any one of its allocations, in the forward or in a recomputation, leaves
// the device and the host allocator as it found them once its scope closed and the
// gradients were dropped.
func TestEveryAllocationOfACheckpointedStepMayFail(t *testing.T) {
	base := tensortest.Sim(t, 256<<20, true)
	d := tensortest.NewFlaky(t, base)
	host := newHost(t, d)
	m := linears(d, 4, 8, 1)
	for name, c := range map[string]struct {
		cfg               checkpoint.Config
		offload, autocast bool
	}{
		"plain":     {},
		"selective": {cfg: checkpoint.Config{Policy: checkpoint.SaveOps(tensor.OpLinear)}},
		"offload":   {offload: true},
		"autocast":  {cfg: checkpoint.Config{Policy: checkpoint.SaveOps(tensor.OpLinear)}, autocast: true},
	} {
		t.Run(name, func(t *testing.T) {
			step := func() {
				root := newScope(3)
				defer root.Close()
				s := root
				if c.offload {
					s = checkpoint.SaveOnCPU(root, host)
				}
				x := input(s, d, 4, 8)
				var region *tensor.Scope
				if c.autocast {
					var err error
					region, err = amp.Autocast(s, dtype.F16)
					require.NoError(t, err)
				}
				y := checkpoint.SequentialWith(c.cfg, m, 2, x).Gelu().Cast(dtype.F32)
				if region != nil {
					region.Close() // the backward recomputes without the weight-cast cache
				}
				y.Sum().Backward()
			}
			reset := func() {
				for _, p := range nn.Parameters(m) {
					p.ZeroGrad(true)
				}
			}
			before := tensortest.Requested(t, base)
			d.Refuse(0)
			require.NoError(t, tensor.Try(step))
			reset()
			total := d.Allocs()
			for n := 1; n <= total; n++ {
				d.Refuse(n)
				err := tensor.Try(step)
				reset()
				require.ErrorIs(t, err, device.ErrOutOfMemory, "allocation %d of %d refused", n, total)
				require.Equal(t, before, tensortest.Requested(t, base), "allocation %d of %d refused (%v)", n, total, err)
				require.Zero(t, host.Stats().ActiveRequests.Current, "host blocks: allocation %d of %d refused", n, total)
			}
			d.Refuse(0)
		})
	}
	m.Release()
	tensortest.RequireEmpty(t, base)
}
