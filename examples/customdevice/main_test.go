package main

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

func runOK(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, run(args, &out), "output:\n%s", out.String())
	return out.String()
}

// The default run on the meta device: the allocator's calls to the user's device,
// exactly.
func TestMeterUnderTheAllocator(t *testing.T) {
	out := runOK(t)
	for _, line := range []string{
		"step  tensor allocations  device Mallocs  device Frees  in use at driver  loss\n",
		"1                     33               5             0        626.00 MiB     -\n",
		"2                     21               2             0        882.00 MiB     -\n",
		"5                     21               0             0        882.00 MiB     -\n",
		"the allocator served 123 tensor allocations with 10 device Mallocs (128.00 MiB ×6, 64.00 MiB ×1, 32.00 MiB ×1, 16.00 MiB ×1, 2.00 MiB ×1); in use at the driver 882.00 MiB = reserved by the allocator 882.00 MiB; peak 882.00 MiB\n",
		"run 2: budget 661.50 MiB (meter refuses a Malloc past it)\n",
		"batch 8192: step 1 done",
		// Adam's state, made in step 1, leaves too little for step 2's activations.
		"batch 8192: out of memory: meter refused 2 Malloc(s) so far; the allocator released its cache and retried 1 time(s), then reported\n",
		"alloc: out of memory on meter(sim). Tried to allocate 128.00 MiB. Device meter(sim) has a total capacity of 661.50 MiB",
		"held after the failed step: 240.56 MiB (parameters and optimizer state: 240.56 MiB)\n",
		"batch 4096: step 5 done",
		"run 2: 5 steps at batch 4096; meter: 8 Mallocs, 2 refused, peak 626.00 MiB of the budget 661.50 MiB\n",
	} {
		assert.Contains(t, out, line)
	}
}

// With data the model trains through the wrapper: the CPU kernels compute on the
// memory meter's Bytes forwards.
func TestMeterWithData(t *testing.T) {
	out := runOK(t, "-device", "cpu", "-sizes", "64,256,10", "-batch", "512", "-steps", "3")
	assert.Regexp(t, `(?m)^1\s+23\s+1\s+0\s+4\.00 MiB\s+2\.\d{4}$`, out)
	assert.Contains(t, out, "alloc: out of memory on meter(cpu)")
	assert.Regexp(t, `batch 256: step 3 done, loss 2\.\d{4}`, out)
}

// meter's own contract: counts, the budget as an out-of-memory error the allocator
// recovers from, the budget as the total of MemInfo, and nothing left behind.
func TestMeter(t *testing.T) {
	d, err := sim.New(sim.Options{Backing: true})
	require.NoError(t, err)
	m := newMeter(d, 4<<20)
	p, err := m.Malloc(3 << 20)
	require.NoError(t, err)
	_, err = m.Malloc(2 << 20)
	assert.True(t, errors.Is(err, device.ErrOutOfMemory), "%v", err)
	free, total, err := m.MemInfo()
	require.NoError(t, err)
	assert.Equal(t, [2]int64{1 << 20, 4 << 20}, [2]int64{free, total})
	b, ok := m.Bytes(p, 16)
	assert.True(t, ok)
	assert.Len(t, b, 16)
	assert.Error(t, m.Free(p+512), "not an allocation")
	require.NoError(t, m.Free(p))
	assert.Equal(t, counts{mallocs: 1, frees: 1, refused: 1, peak: 3 << 20}, m.counts())
	assert.Equal(t, "3.00 MiB ×1", m.histogram())

	// Through the allocator and a tensor: a tensor of 3 MiB takes a 20 MiB segment,
	// which the budget refuses; the allocator reports its OOMError.
	a, err := alloc.For(m)
	require.NoError(t, err)
	s := tensor.NewScope()
	err = tensor.Try(func() { s.Zeros(m, dtype.F32, 3<<18) })
	var oom *alloc.OOMError
	require.ErrorAs(t, err, &oom)
	assert.Equal(t, int64(20<<20), oom.SegmentSize)
	small := s.Zeros(m, dtype.F32, 1000)
	assert.Equal(t, "meter(sim)", small.Device().Name())
	s.Close()
	require.NoError(t, a.EmptyCache())
	assert.Zero(t, a.Stats().ReservedBytes[alloc.StatAll].Current)
	assert.Zero(t, m.counts().inUse)
	assert.Zero(t, d.Stats().InUse)
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-sizes", "8"}, {"-sizes", "x"}, {"-batch", "1"}, {"-steps", "0"}, {"-budget", "-1"},
		{"-device", "tpu"}, {"-device", "cuda:0"}, {"extra"},
	} {
		var out bytes.Buffer
		assert.Error(t, run(args, &out), "%v", args)
	}
}
