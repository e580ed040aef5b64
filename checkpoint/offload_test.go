package checkpoint_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc/pinned"
	"github.com/subletml/sublet/checkpoint"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// newHost is the pinned host allocator of d, closed (empty) when the test ends.
func newHost(t *testing.T, d device.Device) *pinned.Allocator {
	h, err := pinned.New(d)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.Zero(t, h.Stats().ActiveRequests.Current, "host blocks in use at the end")
		require.NoError(t, h.Close())
	})
	return h
}

// An MLP's forward under SaveOnCPU leaves no activation on the (simulated) GPU, each in
// a host block until the graph releases it, and gives the plain gradients.
func TestSaveOnCPU(t *testing.T) {
	const batch, width = 8, 16
	act, weight := int64(batch*width*4), int64(width*width*4)
	gpu := tensortest.Sim(t, 64<<20, true) // a simulated GPU that keeps data
	m := nn.NewMLP(nn.Init{Device: gpu, Gen: tensor.NewGenerator(4)}, nn.MLPConfig{Sizes: []int{width, width, width, width}})
	params := tensortest.Sizes(nn.Parameters(m)...)
	run := func(host *pinned.Allocator) [][]float32 {
		root := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(9)))
		defer root.Close()
		s := root
		if host != nil {
			s = checkpoint.SaveOnCPU(root, host)
		}
		x := s.Randn(gpu, dtype.F32, batch, width)
		y := m.Forward(x)
		if host != nil {
			tensortest.RequireLive(t, gpu, "after the forward: no activation on the device", append(params, x.Bytes(), y.Bytes())...)
			// Linear 1 saves x; each ReLU its output; Linears 2 and 3 their input and
			// weight: five activations and two weights, each in a block of its own.
			st := host.Stats()
			require.Equal(t, int64(7), st.ActiveRequests.Current)
			require.Equal(t, 5*act+2*weight, st.ActiveBytes.Current)
		}
		loss := y.Sum()
		loss.BackwardWith(tensor.BackwardOptions{RetainGraph: true})
		if host != nil {
			require.Equal(t, int64(7), host.Stats().ActiveRequests.Current, "a retained graph keeps its blocks")
		}
		loss.Backward() // copies back again, and releases them
		if host != nil {
			require.Zero(t, host.Stats().ActiveRequests.Current)
		}
		g := grads(m)
		for _, p := range nn.Parameters(m) {
			p.ZeroGrad(true)
		}
		return g
	}
	want := run(nil)
	host := newHost(t, gpu)
	require.Equal(t, want, run(host), "the gradients of a plain backward")
	require.Zero(t, host.Stats().ActiveRequests.Current, "the graph gave its blocks back")
	m.Release()
	tensortest.RequireEmpty(t, gpu)
}

// Tensors on the cpu device stay as they are; a Checkpoint inside keeps its inputs
// through the offload; a tensor of another device than the allocator's is an error.
func TestSaveOnCPUKeepsCPUTensorsAndNests(t *testing.T) {
	cpuDev, gpu := tensortest.CPU(t), tensortest.Sim(t, 64<<20, true)
	root := tensor.NewScope()
	s := checkpoint.SaveOnCPU(root, newHost(t, cpuDev))
	x := s.Ones(cpuDev, dtype.F32, 4).SetRequiresGrad(true)
	e := x.Exp()
	tensortest.RequireLive(t, cpuDev, "Exp kept its output on the cpu", x.Bytes(), e.Bytes())
	e.Sum().Backward()
	root.Close()
	tensortest.RequireEmpty(t, cpuDev)

	host := newHost(t, gpu)
	root = tensor.NewScope()
	s = checkpoint.SaveOnCPU(root, host)
	x = s.Ones(gpu, dtype.F32, 64).SetRequiresGrad(true)
	y := checkpoint.Checkpoint(func(x *tensor.Tensor) *tensor.Tensor { return x.Exp().Tanh() }, x)
	tensortest.RequireLive(t, gpu, "x and y only", x.Bytes(), y.Bytes())
	require.Equal(t, int64(1), host.Stats().ActiveRequests.Current, "the checkpoint's input, offloaded")
	y.Sum().Backward()
	require.Zero(t, host.Stats().ActiveRequests.Current)
	err := tensor.Try(func() { s.Ones(cpuDev, dtype.F32, 2).SetRequiresGrad(true).To(gpu).Exp() })
	require.NoError(t, err, "a gpu tensor saves to the gpu's allocator")
	other := tensortest.Sim(t, 64<<20, true)
	err = tensor.Try(func() { s.Ones(other, dtype.F32, 2).SetRequiresGrad(true).Exp() })
	require.ErrorContains(t, err, "use one SaveOnCPU scope per device")
	root.Close()
	tensortest.RequireEmpty(t, gpu)
	tensortest.RequireEmpty(t, other)
}

// On a GPU the copies both ways are asynchronous and the host block, recorded on the
// stream, waits for them before it is reused.
func TestSaveOnCPUCopiesAsynchronouslyOnAGPU(t *testing.T) {
	gpu := tensortest.NewGPU(t, "cuda:0")
	host := newHost(t, gpu)
	require.True(t, host.Pinned(), "blocks from the device's HostAlloc")
	root := tensor.NewScope()
	hooks := checkpoint.SaveOnCPU(root, host).SavedHooks()
	x := tensor.FromSlice(root, gpu, dtype.F32, []float32{1, 2, 3, 4}, 2, 2)
	packed, err := hooks.Pack(root.Keep(root.Bind(x)))
	require.NoError(t, err)
	require.Equal(t, 1, gpu.Async)
	back, err := hooks.Unpack(packed)
	require.NoError(t, err)
	require.Equal(t, 2, gpu.Async)
	require.Equal(t, []float32{1, 2, 3, 4}, tensortest.Values(back.(*tensor.Tensor)))
	back.Release()
	packed.Release()
	require.Zero(t, host.Stats().ActiveRequests.Current)
	require.NoError(t, host.EmptyCache(), "the parked block's event completed: it is given back")
	require.Zero(t, host.Stats().Allocations.Current)
	root.Close()
	tensortest.RequireEmpty(t, gpu)
}
