package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestH200CostNumbers(t *testing.T) {
	c := H200Cost()
	assert.Equal(t, 58*time.Microsecond, c.Pair(512))
	assert.Equal(t, 58*time.Microsecond, c.Pair(2<<20))
	assert.Equal(t, 58*time.Microsecond, c.Pair(20<<20), "up to 20 MiB costs the base")
	// 58 µs + 1.25 ms × (1 GiB - 20 MiB)/GiB = 58 µs + 1225.5859375 µs.
	assert.Equal(t, 1283585*time.Nanosecond, c.Pair(1<<30))
	assert.Equal(t, 58*time.Microsecond+1250*time.Microsecond, c.Pair(1<<30+20<<20))
	assert.Equal(t, time.Duration(0), CostModel{}.Pair(1<<40), "the zero model is free")
}

func TestVirtualClockChargesPairs(t *testing.T) {
	d := newSim(t, Options{})
	a, err := d.Malloc(1 << 20)
	require.NoError(t, err)
	assert.Equal(t, 29*time.Microsecond, d.Elapsed(), "Malloc takes half a pair")
	b, err := d.Malloc(1 << 30)
	require.NoError(t, err)
	require.NoError(t, d.Free(a))
	require.NoError(t, d.Free(b))
	assert.Equal(t, 58*time.Microsecond+1283585*time.Nanosecond, d.Elapsed(), "two whole pairs")

	r, err := d.Reserve(64 << 20)
	require.NoError(t, err)
	assert.Equal(t, 58*time.Microsecond+1283585*time.Nanosecond, d.Elapsed(), "Reserve is free")
	require.NoError(t, d.Map(r, 32<<20))
	require.NoError(t, d.Unmap(r, 32<<20))
	require.NoError(t, d.Unreserve(r, 64<<20))
	want := 58*time.Microsecond + 1283585*time.Nanosecond + H200Cost().Pair(32<<20)
	assert.Equal(t, want, d.Elapsed(), "a Map and Unmap pair is priced like Malloc and Free")

	_, err = d.Malloc(1 << 50)
	require.Error(t, err)
	assert.Equal(t, want, d.Elapsed(), "a failed Malloc costs nothing")
	assert.Equal(t, int64(0), d.Stats().InUse)
}

func TestZeroCostModel(t *testing.T) {
	d := newSim(t, Options{Cost: &CostModel{}})
	p, err := d.Malloc(1 << 30)
	require.NoError(t, err)
	require.NoError(t, d.Free(p))
	assert.Equal(t, time.Duration(0), d.Elapsed())
}

// Sleep mode really waits: a lower bound only, which no scheduler can break.
func TestSleepWaitsAtLeastTheCost(t *testing.T) {
	d := newSim(t, Options{Sleep: true, Cost: &CostModel{PairBase: 4 * time.Millisecond}})
	start := time.Now()
	p, err := d.Malloc(1 << 20)
	require.NoError(t, err)
	require.NoError(t, d.Free(p))
	assert.GreaterOrEqual(t, time.Since(start), 4*time.Millisecond)
	assert.Equal(t, 4*time.Millisecond, d.Elapsed())
	assert.Equal(t, int64(0), d.Stats().InUse)
}
