package devicetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
)

func (s suite) streams(t *testing.T) {
	x := s.open(t)
	d := x.d
	require.NoError(t, d.SynchronizeStream(0), "the default stream always exists")
	require.NoError(t, d.Synchronize())
	seen := map[device.Stream]bool{0: true}
	var ss []device.Stream
	for range 4 {
		st, err := d.NewStream()
		require.NoError(t, err)
		require.False(t, seen[st], "NewStream returned %d twice (0 is the default stream)", st)
		seen[st] = true
		ss = append(ss, st)
		require.NoError(t, d.SynchronizeStream(st))
	}
	require.Error(t, d.DestroyStream(0), "destroying the default stream")
	for _, st := range ss {
		require.NoError(t, d.DestroyStream(st))
		require.Error(t, d.DestroyStream(st), "destroying stream %d twice", st)
		require.Error(t, d.SynchronizeStream(st), "synchronizing destroyed stream %d", st)
	}
	require.NoError(t, d.Synchronize())
	x.expectUsed(0)
}

func (s suite) events(t *testing.T) {
	x := s.open(t)
	d := x.d
	st, err := d.NewStream()
	require.NoError(t, err)
	e, err := d.NewEvent()
	require.NoError(t, err)
	e2, err := d.NewEvent()
	require.NoError(t, err)
	require.NotEqual(t, e, e2)

	done, err := d.QueryEvent(e)
	require.NoError(t, err)
	require.True(t, done, "an event never recorded counts as completed")

	p := x.malloc(1 << 20)
	require.NoError(t, d.Memset(p, 1, 1<<20, st))
	for _, on := range []device.Stream{0, st} {
		require.NoError(t, d.RecordEvent(e, on))
		require.NoError(t, d.SynchronizeEvent(e))
		done, err = d.QueryEvent(e)
		require.NoError(t, err)
		require.True(t, done, "event recorded on stream %d, then synchronized", on)
	}
	require.NoError(t, d.RecordEvent(e2, st))
	require.NoError(t, d.SynchronizeStream(st))
	done, err = d.QueryEvent(e2)
	require.NoError(t, err)
	require.True(t, done, "event recorded on a stream that was then synchronized")

	require.NoError(t, d.DestroyStream(st))
	require.Error(t, d.RecordEvent(e, st), "recording on a destroyed stream")
	require.NoError(t, d.DestroyEvent(e))
	require.Error(t, d.DestroyEvent(e), "destroying an event twice")
	_, err = d.QueryEvent(e)
	require.Error(t, err, "querying a destroyed event")
	require.Error(t, d.RecordEvent(e, 0), "recording a destroyed event")
	require.Error(t, d.SynchronizeEvent(e), "synchronizing a destroyed event")
	require.NoError(t, d.DestroyEvent(e2))
	require.NoError(t, d.Free(p))
	x.expectUsed(0)
}
