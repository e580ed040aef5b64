//go:build linux && (amd64 || arm64)

package nccl

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dist/nccl/nccltest"
)

// fakeGPU stands for a GPU whose context is always current.
type fakeGPU struct{}

func (fakeGPU) Name() string       { return "fake:0" }
func (fakeGPU) MakeCurrent() error { return nil }

// The binding against the stand-in library of package nccltest: the arguments every
// entry point receives (seven of them, one on the stack), the one thread that issues
// them, the ids, the error strings, the asynchronous error, a timed-out init, Destroy
// and Abort.
func TestBindingAgainstAFakeLibrary(t *testing.T) {
	fake := nccltest.Run(t)
	if fake == nil {
		return
	}

	v, err := Version()
	require.NoError(t, err)
	assert.Equal(t, 22807, v)
	id, err := NewUniqueID()
	require.NoError(t, err)
	assert.Equal(t, byte(1), id[0])
	assert.Equal(t, byte(126), id[127], "127·3+1 mod 256")

	c, err := InitRank(fakeGPU{}, 4, 2, id, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "init nranks=4 rank=2 id0=1 id127=126", fake.Last())
	assert.Equal(t, 2, c.Rank())
	assert.Equal(t, 4, c.NRanks())

	const s = device.Stream(0x77)
	require.NoError(t, c.AllReduce(0x1000, 0x2000, 5, Float32, Avg, s))
	assert.Equal(t, "allreduce send=1000 recv=2000 count=5 dt=7 op=4 comm=1 stream=77 thread=1", fake.Last())
	require.NoError(t, c.Broadcast(0x1100, 0x1100, 6, BFloat16, 3, s))
	assert.Equal(t, "broadcast send=1100 recv=1100 count=6 dt=9 root=3 comm=1 stream=77 thread=1", fake.Last())
	require.NoError(t, c.AllGather(0x10, 0x20, 7, Int64, s))
	assert.Equal(t, "allgather send=10 recv=20 count=7 dt=4 comm=1 stream=77 thread=1", fake.Last())
	require.NoError(t, c.ReduceScatter(0x30, 0x40, 8, Float16, Max, s))
	assert.Equal(t, "reducescatter send=30 recv=40 count=8 dt=6 op=2 comm=1 stream=77 thread=1", fake.Last())
	require.NoError(t, c.GroupStart())
	assert.Equal(t, "groupstart thread=1", fake.Last(), "group calls on the thread of the collectives")
	require.NoError(t, c.GroupEnd())
	assert.Equal(t, "groupend thread=1", fake.Last())

	err = c.AllReduce(0x1000, 0x1000, 13, Float32, Sum, 0)
	var ne *Error
	require.True(t, errors.As(err, &ne), "%v", err)
	assert.Equal(t, 5, ne.Code)
	assert.Equal(t, "nccl: ncclAllReduce(13 elements of type 7, op 0): ncclInvalidUsage (invalid usage (run with NCCL_DEBUG=WARN for details)): the fake says no", err.Error())

	require.NoError(t, c.AsyncError())
	fake.SetAsync(6)
	err = c.AsyncError()
	require.True(t, errors.As(err, &ne), "%v", err)
	assert.Equal(t, "ncclRemoteError", ne.Name)
	fake.SetAsync(7)
	assert.NoError(t, c.AsyncError(), "in progress is no error")
	fake.SetAsync(0)

	require.NoError(t, c.Destroy())
	assert.Equal(t, "destroy thread=1", fake.Last())
	assert.ErrorIs(t, c.AllReduce(0x1000, 0x1000, 1, Float32, Sum, 0), ErrClosed)
	assert.ErrorIs(t, c.AsyncError(), ErrClosed)
	assert.ErrorIs(t, c.Destroy(), ErrClosed)
	require.NoError(t, c.Abort(), "an abort after Destroy does nothing")

	c, err = InitRank(fakeGPU{}, 2, 0, id, 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, c.Abort())
	assert.Equal(t, "abort comm=1", fake.Last())
	require.NoError(t, c.Abort())
	assert.ErrorIs(t, c.GroupStart(), ErrClosed)

	_, err = InitRank(fakeGPU{}, 100, 99, id, 5*time.Second)
	require.True(t, errors.As(err, &ne), "%v", err)
	assert.Contains(t, err.Error(), "ncclCommInitRankScalable(100 ranks, rank 99, fake:0): ncclRemoteError (remote process exited or there was a network error)")

	_, err = InitRank(fakeGPU{}, 7, 0, id, 50*time.Millisecond)
	require.ErrorIs(t, err, ErrTimeout)
	assert.Contains(t, err.Error(), "rank 0 of 7 on fake:0: not every rank joined within 50ms")
}
