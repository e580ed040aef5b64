package sim

import (
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
)

const mib = 1 << 20

// newSim returns a new device, or skips the test where pointers have 32 bits, after
// checking that New refuses to run there.
func newSim(t *testing.T, o Options) *Device {
	t.Helper()
	d, err := New(o)
	if strconv.IntSize < 64 {
		require.ErrorContains(t, err, "needs 64-bit pointers")
	}
	need64(t)
	require.NoError(t, err)
	return d
}

// need64 skips a test of 64-bit device addresses where pointers have 32 bits.
func need64(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("the simulated device needs 64-bit pointers")
	}
}

// ptr is a as a device.Ptr, so that test tables of 64-bit addresses compile on 32-bit
// platforms (where newSim skips).
func ptr(a uint64) device.Ptr { return device.Ptr(a) }

func TestDefaultsAreMetaH200(t *testing.T) {
	d := newSim(t, Options{})
	free, total, err := d.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, int64(150109880320), total)
	assert.Equal(t, total, free)
	assert.Equal(t, "sim", d.Name())
	assert.Equal(t, device.Sim, d.Kind())

	// A 130 GiB allocation is only accounted.
	p, err := d.Malloc(130 << 30)
	require.NoError(t, err)
	_, ok := d.Bytes(p, 1)
	assert.False(t, ok, "meta device keeps no data")
	free, _, err = d.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, total-130<<30, free)
	require.NoError(t, d.Free(p))
	assert.Equal(t, int64(0), d.Stats().InUse)
	assert.Equal(t, int64(130<<30), d.Stats().Peak)
}

func TestOOMAtCapacity(t *testing.T) {
	d := newSim(t, Options{Capacity: 10 * mib})
	a, err := d.Malloc(6 * mib)
	require.NoError(t, err)
	_, err = d.Malloc(5 * mib)
	require.ErrorIs(t, err, device.ErrOutOfMemory)
	assert.Contains(t, err.Error(), "6291456 bytes in use and 0 occupied of 10485760")
	b, err := d.Malloc(4 * mib)
	require.NoError(t, err, "exactly filling the capacity succeeds")
	free, _, err := d.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, int64(0), free)
	require.NoError(t, d.Free(a))
	require.NoError(t, d.Free(b))
	st := d.Stats()
	assert.Equal(t, int64(1), st.OOMs)
	assert.Equal(t, int64(2), st.Mallocs)
	assert.Equal(t, int64(2), st.Frees)
	assert.Equal(t, int64(0), st.InUse)
}

func TestFreeErrors(t *testing.T) {
	d := newSim(t, Options{})
	p, err := d.Malloc(mib)
	require.NoError(t, err)
	require.Error(t, d.Free(p+512), "inside an allocation, not its start")
	require.NoError(t, d.Free(p))
	err = d.Free(p)
	require.Error(t, err)
	assert.False(t, errors.Is(err, device.ErrOutOfMemory))
	assert.Contains(t, err.Error(), "freed twice")
	_, err = d.Malloc(0)
	require.Error(t, err)
	assert.Equal(t, int64(0), d.Stats().InUse)
}

func TestNewRejectsBadOptions(t *testing.T) {
	for name, o := range map[string]Options{
		"negative capacity": {Capacity: -1},
		"negative occupied": {Occupied: -1},
		"occupied too much": {Capacity: mib, Occupied: mib + 1},
		"prob above one":    {Faults: Faults{Prob: 1.5}},
		"negative nth":      {Faults: Faults{Nth: -2}},
		"negative cost":     {Cost: &CostModel{PairBase: -1}},
		"unaligned segment": {Segments: []Segment{{Size: mib, Addr: 0x1001}}},
		"empty segment":     {Segments: []Segment{{Size: 0, Addr: 0x200000}}},
	} {
		_, err := New(o)
		assert.Error(t, err, name)
	}
}

func TestOccupiedMemoryIsNeverAvailable(t *testing.T) {
	d := newSim(t, Options{Capacity: 10 * mib, Occupied: 4 * mib})
	free, total, err := d.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, int64(6*mib), free)
	assert.Equal(t, int64(10*mib), total)
	_, err = d.Malloc(6*mib + 1)
	require.ErrorIs(t, err, device.ErrOutOfMemory)
	assert.Contains(t, err.Error(), "0 bytes in use and 4194304 occupied of 10485760")
	p, err := d.Malloc(6 * mib)
	require.NoError(t, err)
	free, _, err = d.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, int64(0), free)
	require.NoError(t, d.Free(p))
	assert.Equal(t, int64(0), d.Stats().InUse)
}
