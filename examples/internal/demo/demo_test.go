package demo

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

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
	for name, want := range map[string]struct {
		kind device.Kind
		data bool
	}{"cpu": {device.CPU, true}, "sim": {device.Sim, false}, "sim-backed": {device.Sim, true}} {
		for range 2 {
			dev, a, hasData, err := Open(name)
			require.NoError(t, err)
			assert.Equal(t, want.kind, dev.Kind(), name)
			assert.Equal(t, want.data, hasData, name)
			assert.Same(t, a, must(alloc.For(dev)), "the device's allocator")
			assert.False(t, seen[dev], "%s: a fresh device each time", name)
			seen[dev] = true
		}
		assert.True(t, must(Fresh(name)), name)
	}
	_, _, _, err := Open("tpu")
	const unknown = `-device: unknown device "tpu": want "cpu", "sim", "sim-backed", "cuda" or "cuda:N" (N = 0, 1, ...)`
	assert.EqualError(t, err, unknown)
	_, err = Fresh("tpu")
	assert.EqualError(t, err, unknown)
	for _, name := range []string{"cuda", "cuda:0"} {
		assert.False(t, must(Fresh(name)), "%s: one device however often opened, GPU or not", name)
		first, _, _, err := Open(name)
		if err != nil {
			assert.ErrorContains(t, err, "named: opening cuda:0: ", "%s is cuda:0, through device/named", name)
			assert.ErrorContains(t, err, "(no usable NVIDIA GPU here: use -device cpu, sim or sim-backed)")
			continue
		}
		again, _, _, err := Open(name)
		require.NoError(t, err)
		assert.Same(t, first, again, "%s: as Fresh says", name)
	}
}

func TestOpenWithSimOptions(t *testing.T) {
	dev, _, hasData, err := OpenWith("sim-backed", sim.Options{Capacity: 64 << 20, Occupied: 1 << 20})
	require.NoError(t, err)
	assert.True(t, hasData, "the name sets the backing store")
	free, total, err := dev.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, [2]int64{63 << 20, 64 << 20}, [2]int64{free, total})
	cpuDev, _, _, err := OpenWith("cpu", sim.Options{Capacity: 64 << 20})
	require.NoError(t, err)
	assert.Equal(t, device.CPU, cpuDev.Kind(), "simulated options do not apply to cpu")
}

func TestReadAndDrain(t *testing.T) {
	_, a, _, err := Open("sim")
	require.NoError(t, err)
	p, err := a.Alloc(1000, 0)
	require.NoError(t, err)
	m := Read(a)
	assert.Equal(t, Memory{Allocated: 1024, Requested: 1000, Reserved: 2 << 20, PeakAllocated: 1024, PeakRequested: 1000, PeakReserved: 2 << 20,
		InactiveSplit: 2<<20 - 1024, Allocations: 1, AllocatedTotal: 1024, DeviceAllocs: 1}, m)
	assert.EqualError(t, Drain(a), "after releasing everything and emptying the cache, the allocator on sim holds 1024 bytes allocated and 2097152 reserved: something leaked")
	require.NoError(t, a.Free(p))
	require.NoError(t, Drain(a))
	assert.Zero(t, Read(a).Reserved)

	_, a, _, err = Open("sim")
	require.NoError(t, err)
	p, err = a.Alloc(3<<20, 0)
	require.NoError(t, err)
	assert.EqualError(t, Drain(a), "after releasing everything and emptying the cache, the allocator on sim holds 3145728 bytes allocated and 20971520 reserved: something leaked", "3 MiB in a 20 MiB segment")
	require.NoError(t, a.Free(p))
	require.NoError(t, Drain(a))
}

// The simulated H200 charges a cuMemAlloc+cuMemFree pair of 2 MiB 58 µs, half for each;
// the CPU's driver calls take real time and are not counted.
func TestDriverTime(t *testing.T) {
	d, err := sim.New(sim.Options{})
	require.NoError(t, err)
	p, err := d.Malloc(2 << 20)
	require.NoError(t, err)
	require.NoError(t, d.Free(p))
	assert.Equal(t, 58*time.Microsecond, DriverTime(d))
	c, err := cpu.New(cpu.Options{})
	require.NoError(t, err)
	assert.Zero(t, DriverTime(c))
	assert.Equal(t, "58µs", DriverTimeText(DriverTime(d)))
	assert.Equal(t, "-", DriverTimeText(DriverTime(c)))
}

func TestTry(t *testing.T) {
	dev, a, _, err := Open("sim")
	require.NoError(t, err)
	assert.EqualError(t, Try(dev, func() error { return errors.New("its own") }), "its own")
	err = Try(dev, func() error {
		s := tensor.NewScope()
		defer s.Close()
		s.Zeros(dev, dtype.F32, 2, 3).MatMul(s.Zeros(dev, dtype.F32, 2, 3))
		return nil
	})
	var te *tensor.Error
	require.ErrorAs(t, err, &te, "a tensor panic comes back as its error")
	require.NoError(t, Drain(a))

	err = Try(dev, func() error { panic(&tensor.Error{Op: "Exp", Err: tensor.ErrNoKernels}) })
	require.ErrorIs(t, err, tensor.ErrNoKernels)
	assert.ErrorContains(t, err, "sim: sublet has no tensor kernels for this device yet (the caching allocator runs there, tensor ops do not); use -device cpu, sim or sim-backed: ")
}

func TestFirstLine(t *testing.T) {
	assert.Equal(t, "alloc: out of memory", FirstLine(errors.New("alloc: out of memory\n  hint: less")))
	assert.Equal(t, "one line", FirstLine(errors.New("one line")))
}

func TestFlagsAndParse(t *testing.T) {
	var dev string
	var help bytes.Buffer
	fs := Flags("x", &help)
	DeviceFlag(fs, &dev, "cpu")
	n := fs.Int("n", 1, "")
	assert.Equal(t, "cpu", dev, "the default")
	require.NoError(t, Parse(fs, []string{"-device", "sim", "-n", "3"}))
	assert.Equal(t, "sim", dev)
	assert.Equal(t, 3, *n)
	assert.EqualError(t, Parse(fs, []string{"-n", "3", "extra"}), `unexpected arguments ["extra"]`)
	assert.Error(t, Parse(fs, []string{"-nope"}))

	help.Reset()
	err := Parse(fs, []string{"-h"})
	require.ErrorIs(t, err, flag.ErrHelp, "-h comes back to run instead of exiting")
	assert.Contains(t, help.String(), "Usage of x:")
	assert.Contains(t, help.String(), "sim-backed (a simulated H200 with data)", "-device lists device/named's names")
}

func TestStatus(t *testing.T) {
	var b strings.Builder
	assert.Equal(t, 0, Status("x", nil, &b))
	fs := Flags("x", io.Discard)
	err := Parse(fs, []string{"-help"})
	assert.Equal(t, 0, Status("x", err, &b), "-h is no failure")
	assert.Empty(t, b.String())
	assert.Equal(t, 1, Status("x", fmt.Errorf("-device: %w", errors.New("unknown device")), &b))
	assert.Equal(t, "x: -device: unknown device\n", b.String())
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
