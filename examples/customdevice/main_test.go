package main

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/examples/internal/demo"
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
		"1                     31               5             0        626.00 MiB     -\n",
		"2                     19               2             0        882.00 MiB     -\n",
		"5                     19               0             0        882.00 MiB     -\n",
		"the allocator served 113 tensor allocations with 10 device Mallocs (128.00 MiB ×6, 64.00 MiB ×1, 32.00 MiB ×1, 16.00 MiB ×1, 2.00 MiB ×1); in use at the driver 882.00 MiB = reserved by the allocator 882.00 MiB; peak 882.00 MiB\n",
		"run 2: budget 661.50 MiB (meter refuses a Malloc past it)\n",
		"batch 8192: step 1 done",
		// Adam's state, made in step 1, leaves too little for step 2's activations.
		"batch 8192: out of memory: meter refused 2 Malloc(s) so far; the allocator released its cache and retried 1 time(s), then reported\n",
		"alloc: out of memory on meter(sim). Tried to allocate 128.00 MiB. Device meter(sim) has a total capacity of 661.50 MiB",
		"held after the failed step: 240.56 MiB (parameters and optimizer state: 240.56 MiB)\n",
		"batch 4096: step 5 done",
		"run 2: 5 steps at batch 4096; meter: 8 Mallocs, 2 refused, peak 626.00 MiB of the budget 661.50 MiB\n",
		"run 3: the tensors' own allocator (tensor.AllocatorSource): a Malloc for every tensor, a Free for every release, nothing cached\n",
		"1                     31              31            19        240.56 MiB     -\n",
		"5                     19              19            19        240.56 MiB     -\n",
		// 6 parameters and 12 Adam moments stay; the H200's cost model charges a pair
		// of cuMemAlloc and cuMemFree 58 µs up to 20 MiB, more above.
		"113 tensor allocations cost 113 device Mallocs and 95 Frees (the caching allocator's: 10 and 0); peak in use at the driver 785.09 MiB (the caching allocator's: 882.00 MiB); simulated driver time 10.409ms (the caching allocator's: 720µs)\n",
	} {
		assert.Contains(t, out, line)
	}
}

// The program's own allocator holds at the driver exactly what the tensors hold: its
// peak is the tensors' peak, the bytes the caching allocator's callers requested at
// theirs (PeakRequested) on the same steps; after each step the parameters and Adam's
// state, 240.56 MiB; and nothing once they are released.
func TestTheTensorsOwnAllocator(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	var caching, owned driverCost
	var requested int64
	require.NoError(t, c.do(func(tr *trainer) error {
		caching = tr.steps(io.Discard, func() int64 { return demo.Read(tr.a).Allocations })
		requested = demo.Read(tr.a).PeakRequested
		return nil
	}, 0, false))
	require.NoError(t, c.do(func(tr *trainer) error {
		owned = tr.steps(io.Discard, tr.dev.(own).al.allocs.Load)
		assert.Equal(t, int64((1024*4096+4096+4096*4096+4096+4096*10+10)*4*3), tr.m.counts().inUse, "the parameters and Adam's two moments")
		assert.Zero(t, demo.Read(tr.a).Allocations, "the caching allocator served no tensor")
		return nil
	}, 0, true))
	assert.Equal(t, caching.tensors, owned.tensors, "the same tensors")
	assert.Equal(t, owned.tensors, owned.mallocs, "a Malloc for every tensor")
	assert.Equal(t, owned.mallocs-18, owned.frees, "a Free for every release but the 6 parameters and 12 moments")
	assert.Equal(t, requested, owned.peak, "the tensors' peak, to the byte")
	assert.Greater(t, owned.driver, 10*caching.driver)
}

// With data the model trains through the wrapper: the CPU kernels compute on the
// memory meter's Bytes forwards.
func TestMeterWithData(t *testing.T) {
	out := runOK(t, "-device", "cpu", "-sizes", "64,384,10", "-batch", "512", "-steps", "3")
	assert.Regexp(t, `(?m)^1\s+22\s+1\s+0\s+4\.00 MiB\s+2\.\d{4}$`, out)
	assert.Contains(t, out, "alloc: out of memory on meter(cpu)")
	assert.Regexp(t, `batch 256: step 3 done, loss 2\.\d{4}`, out)
	runs := strings.Split(out, "\n\nrun ")
	require.Len(t, runs, 4, out)
	lossesOf := func(run string) []string { return regexp.MustCompile(`(?m)  (2\.\d{4})$`).FindAllString(run, -1) }
	assert.Len(t, lossesOf(runs[1]), 3)
	assert.Equal(t, lossesOf(runs[1]), lossesOf(runs[3]), "the own allocator's tensors compute what the caching allocator's do")
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
