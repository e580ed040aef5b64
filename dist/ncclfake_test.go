//go:build linux && (amd64 || arm64)

package dist

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dist/nccl/nccltest"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// simGPU stands a simulated GPU with data in for a CUDA one: its events are the
// simulator's (held streams keep them pending), its context always current.
type simGPU struct{ *sim.Device }

func (*simGPU) MakeCurrent() error { return nil }

// The NCCL backend's own logic against the stand-in libnccl.so.2 of package nccltest,
// on a simulated GPU: the addresses and types each collective passes, events waited
// for, group calls, and the faults: an asynchronous NCCL error, a collective that never
// completes (held stream: the timeout aborts the communicator), a call that blocks in
// NCCL, a refused call.
func TestNCCLBackendAgainstAFakeLibrary(t *testing.T) {
	fake := nccltest.Run(t)
	if fake == nil {
		return
	}
	gpu := &simGPU{tensortest.Sim(t, 1<<30, true)}
	newBackend := func(timeout time.Duration) (*Group, *NCCL) {
		g, err := Init(Config{WorldSize: 1, Timeout: timeout})
		require.NoError(t, err)
		b, err := NewNCCL(g, gpu)
		require.NoError(t, err)
		assert.Equal(t, "init nranks=1 rank=0 id0=1 id127=126", fake.Last(), "rank 0's id reached ncclCommInitRankScalable")
		return g, b
	}
	g, b := newBackend(10 * time.Second)
	s := tensor.NewScope()
	x := tensor.FromSlice(s, gpu, dtype.F32, []float32{1, 2, 3, 4, 5})
	base := uint64(x.Storage().Ptr())
	v := x.Version()
	require.NoError(t, wait(b.AllReduce(x.Slice(0, 1, 3), Avg)))
	assert.Equal(t, fmt.Sprintf("allreduce send=%x recv=%x count=2 dt=7 op=4 comm=1 stream=0 thread=1", base+4, base+4), fake.Last())
	assert.Greater(t, x.Version(), v, "NCCL's write counts as an in-place write")

	h := tensor.FromSlice(s, gpu, dtype.BF16, []float32{1, 2})
	all := s.Zeros(gpu, dtype.BF16, 2)
	b.GroupStart()
	b.GroupStart()
	w, err := b.AllGather(all, h)
	require.NoError(t, err)
	require.NoError(t, b.GroupEnd())
	assert.ErrorIs(t, w.Wait(), ErrConfig, "inside the group")
	require.NoError(t, b.GroupEnd())
	assert.Equal(t, "groupend thread=1", fake.Last())
	require.NoError(t, w.Wait())
	require.NoError(t, wait(b.ReduceScatter(h.Slice(0, 0, 2), all, Max)))
	hb, ab := uint64(h.Storage().Ptr()), uint64(all.Storage().Ptr())
	assert.Equal(t, fmt.Sprintf("reducescatter send=%x recv=%x count=2 dt=9 op=2 comm=1 stream=0 thread=1", ab, hb), fake.Last())
	require.NoError(t, wait(b.Broadcast(tensor.FromSlice(s, gpu, dtype.I64, []int64{7}), 0)))
	assert.Contains(t, fake.Last(), "count=1 dt=4 root=0")

	_, err = b.AllReduce(x.Unsqueeze(0).Expand(2, 5), Sum)
	assert.ErrorIs(t, err, ErrUnsupported, "not contiguous")
	assert.Contains(t, err.Error(), "NCCL needs contiguous tensors")
	_, err = b.AllReduce(tensortest.F32(s, tensortest.CPU(t), []float32{1}), Sum)
	assert.ErrorIs(t, err, tensor.ErrDevice)

	// NCCL reports an error while the collective is pending
	require.NoError(t, gpu.HoldStream(0))
	fake.SetAsync(6)
	err = wait(b.AllReduce(x, Sum))
	requireDistError(t, err, 0, -1, ErrBackend)
	assert.Contains(t, err.Error(), "NCCL failed (a rank died, or the network); the communicator was aborted: communication library failed: nccl: ncclCommGetAsyncError: the communicator failed: ncclRemoteError")
	assert.Equal(t, "abort comm=1", fake.Last())
	_, err = b.AllReduce(x, Sum)
	assert.Equal(t, err, b.failed, "the backend stays failed")
	require.NoError(t, b.Close(), "an aborted communicator is not destroyed again")
	assert.Eventually(t, func() bool { return g.Err() != nil }, 5*time.Second, time.Millisecond, "the group is aborted too")
	fake.SetAsync(0)
	g.Close()

	// a collective that never completes: the timeout aborts it
	g, b = newBackend(50 * time.Millisecond)
	start := time.Now()
	err = wait(b.AllReduce(x, Sum))
	requireDistError(t, err, 0, -1, ErrTimeout)
	assert.Contains(t, err.Error(), "AllReduce(float32[5], sum): the collective did not complete within 50ms")
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, "abort comm=1", fake.Last())
	require.NoError(t, gpu.ReleaseStream(0))
	g.Close()

	// a call that blocks inside NCCL: 17 elements, in the stand-in
	g, b = newBackend(50 * time.Millisecond)
	_, err = b.AllReduce(tensor.FromSlice(s, gpu, dtype.F32, make([]float32, 17)), Sum)
	requireDistError(t, err, 0, -1, ErrTimeout)
	assert.Contains(t, err.Error(), "AllReduce(float32[17], sum): NCCL did not return within 50ms")
	assert.Equal(t, "abort comm=1", fake.Last())
	g.Close()

	// NCCL refuses a call: 13 elements, in the stand-in
	g, b = newBackend(10 * time.Second)
	_, err = b.AllReduce(tensor.FromSlice(s, gpu, dtype.F32, make([]float32, 13)), Sum)
	requireDistError(t, err, 0, -1, ErrBackend)
	assert.Contains(t, err.Error(), "NCCL refused the collective; the communicator was aborted: communication library failed: nccl: ncclAllReduce(13 elements of type 7, op 0): ncclInvalidUsage")
	g.Close()

	// a healthy backend is destroyed by Close
	g, b = newBackend(10 * time.Second)
	require.NoError(t, b.Close())
	assert.Equal(t, "destroy thread=1", fake.Last())
	_, err = b.AllReduce(x, Sum)
	assert.ErrorIs(t, err, ErrClosed)
	require.NoError(t, b.Close())
	g.Close()

	s.Close()
	tensortest.RequireEmpty(t, gpu)
}
