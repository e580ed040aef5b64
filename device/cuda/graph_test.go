package cuda

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
)

// TestGraphCaptureAndReplay: a kernel launch and a copy captured on a side stream do not
// run during the capture; each replay (on the default stream and on the side stream)
// runs them once. A capture that a host wait invalidates gives an error and no graph,
// and the stream captures again afterwards.
func TestGraphCaptureAndReplay(t *testing.T) {
	d := openTest(t)
	k := kernels(t, d)
	const n = 1 << 16
	x, y := malloc(t, d, 4*n), malloc(t, d, 4*n)
	fill(t, d, x, math.Float32bits(2), n, 0)
	fill(t, d, y, math.Float32bits(1), n, 0)
	require.NoError(t, d.Synchronize())
	s := newStream(t, d)

	require.Error(t, d.BeginCapture(0), "the default stream")
	require.NoError(t, d.BeginCapture(s))
	cfg := LaunchConfig{Grid: Dim3{X: n / 256}, Block: Dim3{X: 256}, Stream: s}
	require.NoError(t, d.Launch(k.axpy, cfg, ArgFloat32(3), ArgPtr(x), ArgPtr(y), ArgUint64(n))) // y += 3x
	require.NoError(t, d.CopyOnDevice(x, y, 4*n, s))                                             // x = y
	g, err := d.EndCapture(s)
	require.NoError(t, err)

	read := func(p device.Ptr) float32 {
		got := make([]byte, 4*n)
		require.NoError(t, d.CopyToHost(got, p, 0))
		v := math.Float32frombits(binary.LittleEndian.Uint32(got))
		for i := range n {
			require.Equal(t, v, math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])), "element %d", i)
		}
		return v
	}
	assert.Equal(t, float32(1), read(y), "the capture ran the kernel")
	require.NoError(t, d.LaunchGraph(g, 0))
	assert.Equal(t, float32(7), read(y))
	assert.Equal(t, float32(7), read(x))
	require.NoError(t, d.LaunchGraph(g, 0))
	require.NoError(t, d.Synchronize()) // s does not wait for the default stream
	require.NoError(t, d.LaunchGraph(g, s))
	require.NoError(t, d.SynchronizeStream(s))
	assert.Equal(t, float32(112), read(y), "y after three replays: 7, 3·7+7, 3·28+28")
	require.NoError(t, d.DestroyGraph(g))
	require.Error(t, d.LaunchGraph(g, 0), "a destroyed graph")
	require.Error(t, d.DestroyGraph(g), "destroyed twice")

	require.NoError(t, d.BeginCapture(s))
	require.Error(t, d.SynchronizeStream(s), "a host wait inside the capture")
	_, err = d.EndCapture(s)
	require.Error(t, err, "an invalidated capture")
	require.NoError(t, d.BeginCapture(s))
	g, err = d.EndCapture(s)
	require.NoError(t, err, "an empty capture after an invalidated one")
	require.NoError(t, d.DestroyGraph(g))
}
