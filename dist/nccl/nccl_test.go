package nccl

import (
	"encoding/binary"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cuda"
)

func TestVersionOrANamedAbsence(t *testing.T) {
	v, err := Version()
	if err != nil {
		require.ErrorIs(t, err, ErrNoLibrary)
		assert.Contains(t, err.Error(), "libnccl.so.2")
		_, err = NewUniqueID()
		assert.ErrorIs(t, err, ErrNoLibrary)
		return
	}
	assert.GreaterOrEqual(t, v, minVersion)
	t.Logf("NCCL %s", versionString(v))
}

func TestVersionString(t *testing.T) {
	assert.Equal(t, "2.28.7", versionString(22807))
	assert.Equal(t, "2.23.4", versionString(minVersion))
}

// gpus opens n GPUs, or skips the test where NCCL, the driver or n GPUs are missing.
func gpus(t *testing.T, n int) []*cuda.Device {
	t.Helper()
	if _, err := Version(); err != nil {
		t.Skip(err)
	}
	count, err := cuda.Count()
	if err != nil || count < n {
		t.Skipf("want %d GPUs: %d (%v)", n, count, err)
	}
	devs := make([]*cuda.Device, n)
	for i := range devs {
		d, err := cuda.Open(i)
		require.NoError(t, err)
		t.Cleanup(func() {
			assert.Equal(t, cuda.Usage{}, d.Usage(), "%s: memory left live", d.Name())
			require.NoError(t, d.Close())
		})
		devs[i] = d
	}
	return devs
}

// floats allocates n float32 on d holding v (or zeros).
func floats(t *testing.T, d *cuda.Device, n int, v ...float32) device.Ptr {
	t.Helper()
	p, err := d.Malloc(int64(4 * n))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Free(p)) })
	b := make([]byte, 4*n)
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	require.NoError(t, d.CopyToDevice(p, b, 0))
	return p
}

func read(t *testing.T, d *cuda.Device, p device.Ptr, n int) []float32 {
	t.Helper()
	require.NoError(t, d.SynchronizeStream(0))
	b := make([]byte, 4*n)
	require.NoError(t, d.CopyToHost(b, p, 0))
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// A world of one through real NCCL: every collective is a copy, and the communicator
// leaves nothing behind.
func TestWorldOfOneOnTheGPU(t *testing.T) {
	d := gpus(t, 1)[0]
	id, err := NewUniqueID()
	require.NoError(t, err)
	c, err := InitRank(d, 1, 0, id, time.Minute)
	require.NoError(t, err)
	x := floats(t, d, 4, 1, 2, 3, 4)
	require.NoError(t, c.AllReduce(x, x, 4, Float32, Sum, 0))
	assert.Equal(t, []float32{1, 2, 3, 4}, read(t, d, x, 4))
	y := floats(t, d, 4)
	require.NoError(t, c.GroupStart())
	require.NoError(t, c.Broadcast(x, y, 4, Float32, 0, 0))
	require.NoError(t, c.AllReduce(x, x, 4, Float32, Avg, 0))
	require.NoError(t, c.GroupEnd())
	assert.Equal(t, []float32{1, 2, 3, 4}, read(t, d, y, 4))
	z := floats(t, d, 4)
	require.NoError(t, c.AllGather(x, z, 4, Float32, 0))
	require.NoError(t, c.ReduceScatter(z, y, 4, Float32, Max, 0))
	assert.Equal(t, []float32{1, 2, 3, 4}, read(t, d, y, 4))
	require.NoError(t, c.AsyncError())
	require.NoError(t, c.Destroy())
	assert.ErrorIs(t, c.AllReduce(x, x, 4, Float32, Sum, 0), ErrClosed)

	c, err = InitRank(d, 1, 0, id2(t), time.Minute)
	require.NoError(t, err)
	require.NoError(t, c.Abort())
	require.NoError(t, c.Abort(), "idempotent")
	assert.ErrorIs(t, c.AsyncError(), ErrClosed)
}

func id2(t *testing.T) UniqueID {
	id, err := NewUniqueID()
	require.NoError(t, err)
	return id
}

// Two ranks in one process, one goroutine each (NCCL allows a rank per thread).
func TestTwoRanksOnTwoGPUs(t *testing.T) {
	devs := gpus(t, 2)
	id := id2(t)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	xs := make([]device.Ptr, 2)
	for r, d := range devs {
		x := floats(t, d, 3, float32(r+1), float32(10*(r+1)), -1)
		xs[r] = x
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := InitRank(d, 2, r, id, time.Minute)
			if err == nil {
				err = c.AllReduce(x, x, 3, Float32, Sum, 0)
			}
			if err == nil {
				err = d.SynchronizeStream(0)
			}
			if err == nil {
				err = errors.Join(c.AsyncError(), c.Destroy())
			}
			errs[r] = err
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	for r, d := range devs {
		assert.Equal(t, []float32{3, 30, -2}, read(t, d, xs[r], 3), "rank %d", r)
	}
}

func TestInitRankChecksItsArguments(t *testing.T) {
	if _, err := Version(); err != nil {
		t.Skip(err)
	}
	_, err := InitRank(nil, 2, 2, UniqueID{}, time.Second)
	assert.ErrorContains(t, err, "rank 2 of 2")
}
