package exdevice

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cuda"
)

func TestFreshDevices(t *testing.T) {
	for name, c := range map[string]struct {
		kind device.Kind
		data bool
	}{"sim": {device.Sim, false}, "sim-backed": {device.Sim, true}, "cpu": {device.CPU, true}} {
		d, data, err := Fresh(name)
		require.NoError(t, err, name)
		assert.Equal(t, c.kind, d.Kind(), name)
		assert.Equal(t, c.data, data, name)
		again, _, err := Fresh(name)
		require.NoError(t, err)
		assert.NotSame(t, d, again, "%s: a new device each time", name)
	}
	// A GPU is the process's one device of its name (device/named), not a fresh one.
	for _, name := range []string{"cuda", "cuda:0", "cuda:1"} {
		d, data, err := Fresh(name)
		if err != nil {
			assert.True(t, errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice), "%s: %v", name, err)
			continue
		}
		again, _, _ := Fresh(name)
		assert.Same(t, d, again, name)
		assert.True(t, data, name)
	}
	_, _, err := Fresh("tpu")
	assert.EqualError(t, err, `-device: unknown device "tpu": want "cpu", "sim", "sim-backed", "cuda" or "cuda:N" (N = 0, 1, ...)`)
}

func TestDrained(t *testing.T) {
	d, _, err := Fresh("sim")
	require.NoError(t, err)
	a, err := alloc.For(d)
	require.NoError(t, err)
	p, err := a.Alloc(3<<20, 0)
	require.NoError(t, err)
	assert.EqualError(t, Drained(a), "after releasing everything and emptying the cache the allocator on sim holds 3145728 bytes allocated and 20971520 reserved: something leaked", "3 MiB in a 20 MiB segment")
	require.NoError(t, a.Free(p))
	require.NoError(t, Drained(a))
	assert.Zero(t, a.Stats().ReservedBytes[alloc.StatAll].Current)
}
