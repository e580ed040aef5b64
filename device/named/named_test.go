package named

import (
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cuda"
)

func TestOpenReturnsOneValuePerName(t *testing.T) {
	for name, want := range map[string]struct {
		kind device.Kind
		name string
		res  device.Residency
	}{
		"cpu":        {device.CPU, "cpu", device.Host},
		"sim":        {device.Sim, "sim", device.Meta},
		"sim-backed": {device.Sim, "sim", device.Host},
	} {
		d, err := Open(name)
		require.NoError(t, err)
		assert.Equal(t, want.kind, d.Kind())
		assert.Equal(t, want.name, d.Name())
		assert.Equal(t, want.res, d.Residency(), name)
		again, err := Open(name)
		require.NoError(t, err)
		assert.Same(t, d, again, "Open(%q) twice", name)
	}
	cpuDev, err := Open("cpu")
	require.NoError(t, err)
	simDev, err := Open("sim")
	require.NoError(t, err)
	assert.NotSame(t, cpuDev, simDev)
}

func TestBadNames(t *testing.T) {
	for _, name := range []string{"", "gpu", "CPU", "cuda:", "cuda:-1", "cuda:x", "cuda:01", "cuda:+1", "cuda:0:1", " cpu"} {
		_, err := Open(name)
		require.Error(t, err, "Open(%q)", name)
		assert.Contains(t, err.Error(), `want "cpu", "sim", "sim-backed", "cuda" or "cuda:N"`, "Open(%q)", name)
	}
}

// gpu reports whether cuda:0 opens here; without a GPU, the cuda names must fail with
// the driver's reason.
func gpu(t *testing.T) bool {
	_, err := Open("cuda:0")
	if err == nil {
		return true
	}
	require.True(t, errors.Is(err, cuda.ErrNoDriver) || errors.Is(err, cuda.ErrNoDevice), "%v", err)
	assert.Contains(t, err.Error(), "named: opening cuda:0: cuda: ")
	return false
}

func TestCUDANames(t *testing.T) {
	if !gpu(t) {
		_, err := Open("cuda")
		require.Error(t, err)
		t.Skip("no CUDA driver or GPU here: the cuda names fail with the reason, as checked")
	}
	d, err := Open("cuda")
	require.NoError(t, err)
	d0, err := Open("cuda:0")
	require.NoError(t, err)
	assert.Same(t, d0, d, `"cuda" is cuda:0`)
	assert.Equal(t, device.CUDA, d.Kind())
	n, err := cuda.Count()
	require.NoError(t, err)
	_, err = Open("cuda:" + strconv.Itoa(n))
	assert.ErrorIs(t, err, cuda.ErrNoDevice)
}

func TestDefault(t *testing.T) {
	t.Setenv(EnvVar, "")
	d, err := Default()
	require.NoError(t, err)
	want := device.CPU
	if gpu(t) {
		want = device.CUDA
	}
	assert.Equal(t, want, d.Kind(), "cuda:0 when usable, else cpu")

	t.Setenv(EnvVar, "sim")
	d, err = Default()
	require.NoError(t, err)
	assert.Equal(t, device.Sim, d.Kind())
	simDev, err := Open("sim")
	require.NoError(t, err)
	assert.Same(t, simDev, d)

	n, err := DefaultName()
	require.NoError(t, err)
	assert.Equal(t, "sim", n.String(), "the name Default opens")
	t.Setenv(EnvVar, "sim-backed")
	n, err = DefaultName()
	require.NoError(t, err)
	assert.Equal(t, Name{Kind: device.Sim, Backed: true}, n, "a program makes its own device of it")
	if !gpu(t) {
		t.Setenv(EnvVar, "cuda:3")
		_, err = Default()
		require.ErrorContains(t, err, `named: SUBLET_DEVICE="cuda:3": `, "an opening failure names the variable")
	}

	t.Setenv(EnvVar, "tpu")
	_, err = DefaultName()
	require.ErrorContains(t, err, `SUBLET_DEVICE="tpu"`)
	_, err = Default()
	require.Error(t, err)
	assert.Equal(t, `named: SUBLET_DEVICE="tpu": unknown device "tpu": want "cpu", "sim", "sim-backed", "cuda" or "cuda:N" (N = 0, 1, ...)`, err.Error(),
		"the package is named once")
}

func TestParse(t *testing.T) {
	for name, want := range map[string]Name{
		"cpu":        {Kind: device.CPU},
		"sim":        {Kind: device.Sim},
		"sim-backed": {Kind: device.Sim, Backed: true},
		"cuda":       {Kind: device.CUDA},
		"cuda:0":     {Kind: device.CUDA},
		"cuda:3":     {Kind: device.CUDA, Ordinal: 3},
	} {
		n, err := Parse(name)
		require.NoError(t, err, name)
		assert.Equal(t, want, n, name)
		canon := name
		if name == "cuda" {
			canon = "cuda:0"
		}
		assert.Equal(t, canon, n.String(), "the canonical name of %q", name)
		again, err := Parse(n.String())
		require.NoError(t, err)
		assert.Equal(t, n, again, "String parses back")
	}
	_, err := Parse("cuda:x")
	assert.EqualError(t, err, `unknown device "cuda:x": want "cpu", "sim", "sim-backed", "cuda" or "cuda:N" (N = 0, 1, ...)`,
		"Parse's error names no package: callers say which flag or variable the name came from")
	_, err = Open("cuda:x")
	assert.EqualError(t, err, `named: unknown device "cuda:x": want "cpu", "sim", "sim-backed", "cuda" or "cuda:N" (N = 0, 1, ...)`)
}
