package alloc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/device"
)

// TrimIdle gives back the pages free at two calls in a row, from segments nothing was
// taken from in between, once the stream's work queued before the first is done; it
// never waits for a stream.
func TestTrimIdle(t *testing.T) {
	a, d := newAlloc(t, 0, Config{Policy: PolicyPlanned})
	s1 := newStream(t, d, true)
	keep := mustAlloc(t, a, 3*MiB, s1)
	big := mustAlloc(t, a, 40*MiB, s1)
	mustFree(t, a, big)
	reserved := cur(a.Stats().ReservedBytes)
	n, err := a.TrimIdle()
	require.NoError(t, err)
	require.Zero(t, n, "the first call only looks")
	n, err = a.TrimIdle()
	require.NoError(t, err)
	require.Zero(t, n, "stream s1 is held: its work before the first call is not done, and TrimIdle does not wait")
	require.NoError(t, d.ReleaseStream(s1))
	n, err = a.TrimIdle()
	require.NoError(t, err)
	require.Equal(t, 40*MiB, n, "the free pages go back")
	require.Equal(t, reserved-40*MiB, cur(a.Stats().ReservedBytes))
	checkInvariants(t, a)

	// A segment taken from between two calls keeps its pages until two calls see it idle.
	x := mustAlloc(t, a, 8*MiB, s1)
	mustFree(t, a, x)
	_, err = a.TrimIdle()
	require.NoError(t, err)
	mustFree(t, a, mustAlloc(t, a, 3*MiB, s1))
	n, err = a.TrimIdle()
	require.NoError(t, err)
	require.Zero(t, n, "used since it was seen free")
	n, err = a.TrimIdle()
	require.NoError(t, err)
	require.Positive(t, n)
	checkInvariants(t, a)
	mustFree(t, a, keep)
	requireDrained(t, a, d)
}

// While a plan serves a loop, the cached pages it left free (here those of a large
// block freed before training) go back in the background, and the steps go on with no
// device allocation.
func TestTrimIdleUnderAPlan(t *testing.T) {
	a, d := newAlloc(t, 0, Config{Policy: PolicyPlanned})
	mustFree(t, a, mustAlloc(t, a, 200*MiB, 0))
	l := newTrainLoop(t, a, []int64{3 * MiB, 5*MiB + 700, 300 * KiB, 7 * MiB})
	i := untilPlanned(t, l, 0)
	before := a.Stats()
	_, idle := a.pageVictims(0, 0)
	require.Greater(t, idle, 100*MiB)
	var trimmed int64
	for j := range 3 {
		n, err := a.TrimIdle()
		require.NoError(t, err)
		trimmed += n
		l.step(i + j)
		checkInvariants(t, a)
	}
	st := a.Stats()
	require.Equal(t, idle, trimmed, "every whole free page")
	require.Equal(t, cur(before.ReservedBytes)-trimmed, cur(st.ReservedBytes))
	require.Equal(t, before.NumDeviceAlloc, st.NumDeviceAlloc, "the plan needs none of the pages given back")
	require.Equal(t, l.period(), a.PlanStats().Period)
	l.close()
	requireDrained(t, a, d)
}

func TestTrimIdleErrors(t *testing.T) {
	a, _ := newAlloc(t, 0, Config{})
	_, err := a.TrimIdle()
	require.ErrorContains(t, err, "needs policy:planned")
	p, _ := newAlloc(t, 0, Config{Policy: PolicyPlanned})
	require.ErrorContains(t, p.TrimEvery(context.Background(), 0), "want a positive one")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	q := mustAlloc(t, p, 40*MiB, 0)
	mustFree(t, p, q)
	require.ErrorIs(t, p.TrimEvery(ctx, time.Millisecond), context.DeadlineExceeded)
	require.Zero(t, cur(p.Stats().ReservedBytes), "the idle pages went back in the background")
	pool := p.NewPool()
	require.NoError(t, p.BeginCapture(device.Stream(0), pool))
	n, err := p.TrimIdle()
	require.NoError(t, err)
	require.Zero(t, n, "nothing during a capture")
	require.NoError(t, p.EndCapture(0))
}
