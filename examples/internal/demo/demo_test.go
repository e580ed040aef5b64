package demo

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/examples/internal/exflag"
)

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 512: "512 B", 1023: "1023 B", 1024: "1.00 KiB", 8_000_000: "7.63 MiB",
		3 << 30: "3.00 GiB", -1536: "-1.50 KiB"} {
		assert.Equal(t, want, Bytes(n))
	}
	assert.Equal(t, "+7.63 MiB", Growth(8_000_000))
	assert.Equal(t, "0 B", Growth(0))
	assert.Equal(t, "-512 B", Growth(-512))
}

func TestTable(t *testing.T) {
	var out bytes.Buffer
	Table(&out, "  ", []string{"", "a", "long header"}, [][]string{{"first row", "1", "2"}, {"x", "→ 10"}})
	assert.Equal(t, ""+
		"                a  long header\n"+
		"  first row     1            2\n"+
		"  x          → 10\n", out.String())
}

func TestOpen(t *testing.T) {
	seen := map[device.Device]bool{}
	for name, data := range map[string]bool{"cpu": true, "sim": false, "sim-backed": true} {
		for range 2 {
			dev, a, hasData, err := Open(name)
			require.NoError(t, err)
			assert.Equal(t, data, hasData, name)
			assert.Same(t, a, must(alloc.For(dev)), "the device's allocator")
			assert.False(t, seen[dev], "%s: a fresh device each time", name)
			seen[dev] = true
		}
	}
	_, _, _, err := Open("tpu")
	assert.ErrorContains(t, err, `-device: unknown device "tpu": want "cpu", "sim", "sim-backed", "cuda" or "cuda:N"`)
	if _, _, _, err := Open("cuda"); err != nil {
		assert.ErrorContains(t, err, "named: opening cuda:0: ", "cuda is cuda:0")
	}
	if _, _, _, err := Open("cuda:0"); err != nil {
		assert.ErrorContains(t, err, "use -device cpu, sim or sim-backed")
	}
}

func TestReadAndDrain(t *testing.T) {
	_, a, _, err := Open("sim")
	require.NoError(t, err)
	p, err := a.Alloc(1000, 0)
	require.NoError(t, err)
	m := Read(a)
	assert.Equal(t, Memory{Allocated: 1024, Requested: 1000, Reserved: 2 << 20, PeakAllocated: 1024, PeakReserved: 2 << 20,
		InactiveSplit: 2<<20 - 1024, Allocations: 1, AllocatedTotal: 1024, DeviceAllocs: 1}, m)
	assert.ErrorContains(t, Drain(a), "at the end 1024 bytes are still allocated and 2097152 reserved on sim")
	require.NoError(t, a.Free(p))
	require.NoError(t, Drain(a))
}

func TestFlags(t *testing.T) {
	var dev string
	fs := Flags("x", io.Discard, &dev, "cpu")
	n := fs.Int("n", 1, "")
	require.NoError(t, exflag.Parse(fs, []string{"-device", "sim", "-n", "3"}))
	assert.Equal(t, "sim", dev)
	assert.Equal(t, 3, *n)
	assert.ErrorContains(t, exflag.Parse(Flags("x", io.Discard, &dev, "cpu"), []string{"extra"}), `unexpected arguments ["extra"]`)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
