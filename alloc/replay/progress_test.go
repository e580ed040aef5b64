package replay

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/device/sim"
)

func TestReplayWithReportsProgress(t *testing.T) {
	var events []Event
	for i := range 5000 {
		events = append(events, Event{Op: OpAlloc, ID: int64(i), Size: 512}, Event{Op: OpFree, ID: int64(i)})
	}
	a := newAllocator(t, "", sim.Options{})
	var calls []int
	res, err := ReplayWith(a, events, Options{Progress: func(done int) { calls = append(calls, done) }})
	require.NoError(t, err)
	assert.Equal(t, []int{4096, 8192, 10000}, calls)
	assert.Nil(t, res.Series)
	requireReleased(t, a, res)
}
