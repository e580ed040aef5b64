package checkpoint_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/amp"
	"github.com/subletml/sublet/checkpoint"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// autocastForward runs m on x under an F16 autocast region (k 0: plainly, else
// Sequential with k segments) and closes the region, releasing its weight-cast
// cache; the result is kept in x's scope. It returns the bytes live in the region
// and after it, above what was live before.
func autocastForward(t *testing.T, dev device.Device, m *nn.Sequential, k int, x *tensor.Tensor) (y *tensor.Tensor, inRegion, after int64) {
	start := tensortest.Requested(t, dev)
	ac, err := amp.Autocast(x.Scope(), dtype.F16)
	require.NoError(t, err)
	y = ac.Keep(forward(m, checkpoint.Config{}, k, ac.Bind(x)))
	inRegion = tensortest.Requested(t, dev) - start
	ac.Close()
	return y, inRegion, tensortest.Requested(t, dev) - start
}

// TestAMPMemory is PyTorch's autocast rows (docs/checkpoint.md) on the meta device: 16 × Linear(1024),
// batch 1024, F16 autocast. After the autocast region closed PyTorch keeps 66 MiB
// without checkpointing (17 F16 activations of 2 MiB, the input's cast included, and
// the 16 weight casts the Linears saved) and 22 MiB with k = 4 (3 boundaries, the
// last segment's 4 activations and 4 weight casts); so do we. Inside the region the
// cache also holds the 12 casts of the checkpointed segments' weights and the input's
// cast (a leaf that requires grad is cached like a weight, as in PyTorch), which
// without checkpointing the first Linear saves anyway.
func TestAMPMemory(t *testing.T) {
	const half = 2 * mib     // one F16 activation or weight cast
	const biases = 16 * 2048 // the 16 F16 bias casts, cached in the region only
	for _, c := range []struct{ k, after, inRegion int64 }{
		{0, 66 * mib, 66*mib + biases},
		{4, 22 * mib, 22*mib + 12*half + half + biases},
	} {
		t.Run(fmt.Sprintf("k=%d", c.k), func(t *testing.T) {
			dev := tensortest.Meta(t)
			m := linears(dev, 16, 1024, 1)
			s := newScope(2)
			x := input(s, dev, 1024, 1024)
			y, inRegion, after := autocastForward(t, dev, m, int(c.k), x)
			assert.Equal(t, c.after, after, "after the region")
			assert.Equal(t, c.inRegion, inRegion, "in the region")
			y.Cast(dtype.F32).Sum().Backward()
			require.Equal(t, nn.ParameterBytes(m), nn.GradBytes(m))
			finish(t, dev, s, m)
		})
	}
}

// TestAMPGradients: a backward after the autocast region closed recomputes under the
// forward's policy (its casts no longer cached) and gives the plain autocast run's
// gradients exactly.
func TestAMPGradients(t *testing.T) {
	for _, d := range tensortest.DataDevices(t) {
		run := func(k int) [][]float32 {
			m := linears(d.Device, 8, 16, 3)
			defer m.Release()
			s := newScope(4)
			defer s.Close()
			y, _, _ := autocastForward(t, d.Device, m, k, input(s, d.Device, 8, 16))
			y.Cast(dtype.F32).Sum().Backward()
			return grads(m)
		}
		want := run(0)
		for _, k := range []int{2, 3, 8} {
			require.Equal(t, want, run(k), "%s k=%d", d.Name, k)
		}
		tensortest.RequireEmpty(t, d.Device)
	}
}

// A selective checkpoint under autocast, backpropagated after the region closed (its
// weight casts no longer cached, so the recomputation casts the weights again): the
// casts the recomputation makes are not matched against the kept results, and the
// gradients are the plain autocast run's.
func TestAMPSelectiveGradients(t *testing.T) {
	d := tensortest.CPU(t)
	run := func(c *checkpoint.Config) [][]float32 {
		m := linears(d, 3, 16, 3)
		defer m.Release()
		s := newScope(4)
		defer s.Close()
		x := input(s, d, 8, 16)
		ac, err := amp.Autocast(s, dtype.F16)
		require.NoError(t, err)
		y := apply(c, geluStack(m), x)
		ac.Close()
		y.Cast(dtype.F32).Sum().Backward()
		return grads(m)
	}
	want := run(nil)
	require.Equal(t, want, run(&checkpoint.Config{}))
	require.Equal(t, want, run(&checkpoint.Config{Policy: checkpoint.SaveOps(tensor.OpLinear)}))
	tensortest.RequireEmpty(t, d)
}
