package profiler

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/tensor"
)

// clock is a fake clock that advances 1 µs per reading.
type clock struct{ t time.Duration }

func (c *clock) now() time.Duration { c.t += time.Microsecond; return c.t }

// step is what a tensor op sequence does: Linear = MatMul (4 MiB out) + Add (4 MiB
// out, the MatMul's output freed), then Relu in place of nothing (1 MiB scratch,
// freed).
func step(t *testing.T, h tensor.OpHook, a *alloc.Allocator, dev device.Device) device.Ptr {
	take := func(n int64) device.Ptr {
		p, err := a.AllocTagged(n, 0, alloc.Tag{})
		require.NoError(t, err)
		return p
	}
	lin := h.OpBegin("Linear", dev)
	mm := h.OpBegin("MatMul", dev)
	x := take(4 << 20)
	h.OpEnd(mm)
	add := h.OpBegin("Add", dev)
	y := take(4 << 20)
	require.NoError(t, a.Free(x))
	h.OpEnd(add)
	h.OpEnd(lin)
	relu := h.OpBegin("Relu", dev)
	s := take(1 << 20)
	require.NoError(t, a.Free(s))
	h.OpEnd(relu)
	return y
}

func newProfiled(t *testing.T, o Options) (*Profiler, *alloc.Allocator, device.Device, *clock) {
	d, err := sim.New(sim.Options{Capacity: 1 << 30, Cost: &sim.CostModel{}})
	require.NoError(t, err)
	a, err := alloc.New(d, alloc.Config{})
	require.NoError(t, err)
	c := &clock{}
	o.Now = c.now
	p, err := Start(o, a)
	require.NoError(t, err)
	return p, a, d, c
}

func TestKeyAveragesAndTable(t *testing.T) {
	p, a, d, _ := newProfiled(t, Options{})
	var ys []device.Ptr
	for range 2 {
		ys = append(ys, step(t, p, a, d))
	}
	p.Stop()
	got := map[string]OpStats{}
	for _, o := range p.KeyAverages(false) {
		got[o.Op] = o
	}
	const M = int64(1 << 20)
	assert.Equal(t, OpStats{Op: "Linear", Calls: 2, Allocated: 16 * M, SelfAllocated: 0, Freed: 0, Peak: 8 * M,
		TotalTime: got["Linear"].TotalTime, SelfTime: got["Linear"].SelfTime}, got["Linear"])
	assert.Equal(t, 8*M, got["MatMul"].SelfAllocated)
	assert.Equal(t, 4*M, got["MatMul"].Peak)
	assert.Equal(t, int64(8*M), got["Add"].Freed)
	assert.Equal(t, 4*M, got["Add"].Peak, "Add's output, then the MatMul's freed")
	assert.Equal(t, 1*M, got["Relu"].Peak)
	assert.Equal(t, got["Relu"].Freed, got["Relu"].SelfAllocated)
	// Fake clock: each reading is 1 µs later. The first MatMul reads it at its begin,
	// at the segment's and the block's events and at its end (3 µs), the second
	// without a new segment (2 µs).
	assert.Equal(t, 5*time.Microsecond, got["MatMul"].TotalTime)
	assert.Equal(t, got["Linear"].TotalTime-got["MatMul"].TotalTime-got["Add"].TotalTime, got["Linear"].SelfTime)
	assert.Zero(t, p.Mismatched())

	var b bytes.Buffer
	require.NoError(t, p.Table(&b, SortPeak, 3, false))
	want := `------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  
                    Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg       CPU Mem  Self CPU Mem      Peak Mem    # of Calls  
------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  
                  Linear        25.00%       6.000us        70.83%      17.000us       8.500us      16.0 MiB           0 B       8.0 MiB             2  
                     Add        25.00%       6.000us        25.00%       6.000us       3.000us       8.0 MiB           0 B       4.0 MiB             2  
                  MatMul        20.83%       5.000us        20.83%       5.000us       2.500us       8.0 MiB       8.0 MiB       4.0 MiB             2  
------------------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  
Self CPU time total: 24.000us
`
	assert.Equal(t, want, b.String())
	assert.ErrorContains(t, p.Table(&b, "cuda_time", 0, false), `unknown sort key "cuda_time"`)

	for _, y := range ys {
		require.NoError(t, a.Free(y))
	}
	require.NoError(t, a.EmptyCache())
	assert.Zero(t, a.Stats().ReservedBytes[alloc.StatAll].Current)
}

func TestChromeTrace(t *testing.T) {
	p, a, d, _ := newProfiled(t, Options{Sites: true})
	y := step(t, p, a, d)
	p.Stop()
	var b bytes.Buffer
	require.NoError(t, p.WriteChromeTrace(&b))
	var tr struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Ts   float64        `json:"ts"`
			Dur  float64        `json:"dur"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &tr))
	var ops, counters []string
	var last float64
	for _, e := range tr.TraceEvents {
		assert.GreaterOrEqual(t, e.Ts, last, "sorted by time")
		last = e.Ts
		switch e.Ph {
		case "X":
			ops = append(ops, e.Name)
			assert.Equal(t, "sim", e.Args["device"])
			assert.Regexp(t, `^profiler\.step \(profiler_test\.go:\d+\)$`, e.Args["site"], e.Name)
		case "C":
			counters = append(counters, e.Name)
		}
	}
	assert.ElementsMatch(t, []string{"Linear", "MatMul", "Add", "Relu"}, ops)
	// A 20 MiB segment and the MatMul's 4 MiB, the Add's 4 MiB, the MatMul's freed; a
	// 2 MiB small segment and the Relu's 1 MiB, freed.
	assert.Len(t, counters, 7)
	byName := map[string]OpStats{}
	for _, o := range p.KeyAverages(true) {
		byName[o.Op] = o
	}
	assert.Contains(t, byName["MatMul"].Site, "profiler_test.go:")
	require.NoError(t, a.Free(y))
	require.NoError(t, a.EmptyCache())
}

func TestMismatchedEndAndStop(t *testing.T) {
	p, _, d, _ := newProfiled(t, Options{})
	outer := p.OpBegin("A", d)
	inner := p.OpBegin("B", d)
	p.OpEnd(outer) // B is innermost: refused
	assert.Equal(t, 1, p.Mismatched())
	p.OpEnd(inner)
	p.OpEnd(outer)
	p.Stop()
	assert.Zero(t, p.OpBegin("C", d), "nothing after Stop")
	assert.Len(t, p.KeyAverages(false), 2)
}

// Stop may come from two goroutines at once (the race detector checks it): the history
// is put back once.
func TestConcurrentStops(t *testing.T) {
	p, a, _, _ := newProfiled(t, Options{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); p.Stop() }()
	}
	wg.Wait()
	_, on := a.HistoryOptions()
	assert.False(t, on, "the profiler's sink is gone and history off, as before Start")
}
