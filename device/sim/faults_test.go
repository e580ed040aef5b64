package sim

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
)

// attempt makes raw allocation number i: odd ones Malloc, even ones Map (into r), and
// reports whether it failed, freeing what it got.
func attempt(t *testing.T, d *Device, r device.Ptr, i int) bool {
	t.Helper()
	var err error
	if i%2 == 1 {
		var p device.Ptr
		if p, err = d.Malloc(2 << 20); err == nil {
			require.NoError(t, d.Free(p))
		}
	} else if err = d.Map(r, Granularity); err == nil {
		require.NoError(t, d.Unmap(r, Granularity))
	}
	if err != nil {
		require.ErrorIs(t, err, device.ErrOutOfMemory, "injected failures look like OOM")
		assert.Contains(t, err.Error(), "injected")
		return true
	}
	return false
}

// failures runs calls raw allocations and returns the numbers (1-based) of those failed.
func failures(t *testing.T, d *Device, calls int) []int {
	t.Helper()
	r, err := d.Reserve(Granularity)
	require.NoError(t, err)
	var failed []int
	for i := 1; i <= calls; i++ {
		if attempt(t, d, r, i) {
			failed = append(failed, i)
		}
	}
	require.NoError(t, d.Unreserve(r, Granularity))
	require.Equal(t, int64(0), d.Stats().InUse)
	return failed
}

func TestFailNth(t *testing.T) {
	d := newSim(t, Options{Faults: Faults{Nth: 3}})
	assert.Equal(t, []int{3}, failures(t, d, 10))
	st := d.Stats()
	assert.Equal(t, int64(1), st.Faults)
	assert.Equal(t, int64(4), st.Mallocs, "calls 1, 5, 7, 9")
	assert.Equal(t, int64(5), st.Maps, "calls 2, 4, 6, 8, 10")
	assert.Equal(t, st.Mallocs, st.Frees)
	assert.Equal(t, st.Maps, st.Unmaps)
}

func TestFailEveryNth(t *testing.T) {
	d := newSim(t, Options{Faults: Faults{Nth: 4, Every: true}})
	assert.Equal(t, []int{4, 8, 12}, failures(t, d, 14))
	assert.Equal(t, int64(3), d.Stats().Faults)
}

func TestSetFaultsRestartsTheCount(t *testing.T) {
	d := newSim(t, Options{})
	assert.Empty(t, failures(t, d, 5))
	require.NoError(t, d.SetFaults(Faults{Nth: 2}))
	assert.Equal(t, []int{2}, failures(t, d, 5), "counted from SetFaults")
	require.NoError(t, d.SetFaults(Faults{}))
	assert.Empty(t, failures(t, d, 5))
	require.Error(t, d.SetFaults(Faults{Prob: -0.1}))
}

func TestFailWithProbabilityIsSeeded(t *testing.T) {
	run := func(seed uint64) []int {
		return failures(t, newSim(t, Options{Faults: Faults{Prob: 0.25, Seed: seed}}), 200)
	}
	a, b, c := run(7), run(7), run(8)
	assert.Equal(t, a, b, "the same seed fails the same calls")
	assert.NotEqual(t, a, c, "another seed fails other calls")
	// 200 draws at p = 0.25: 50 expected; [20, 80] is over 5 standard deviations wide.
	assert.InDelta(t, 50, len(a), 30)
	assert.Empty(t, failures(t, newSim(t, Options{Faults: Faults{Prob: 0, Seed: 7}}), 50))
	assert.Len(t, failures(t, newSim(t, Options{Faults: Faults{Prob: 1}}), 50), 50)
}

func TestInvalidCallsDoNotCount(t *testing.T) {
	d := newSim(t, Options{Faults: Faults{Nth: 1}})
	_, err := d.Malloc(0)
	require.Error(t, err)
	require.False(t, errors.Is(err, device.ErrOutOfMemory))
	require.Error(t, d.Map(0x1234, Granularity), "Map outside a reservation")
	_, err = d.Malloc(1 << 20)
	require.ErrorIs(t, err, device.ErrOutOfMemory, "the first valid call is the first counted")
	assert.Equal(t, int64(0), d.Stats().InUse)
}
