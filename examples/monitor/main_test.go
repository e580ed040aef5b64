package main

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/examples/internal/demo"
)

func trainWith(t *testing.T, args ...string) result {
	c, err := parseFlags(args, io.Discard)
	require.NoError(t, err)
	dev, a, hasData, err := demo.Open("cpu")
	require.NoError(t, err)
	var r result
	require.NoError(t, demo.Try(dev, func() error { r, err = train(c, dev, a, hasData); return err }))
	require.NoError(t, demo.Drain(a))
	return r
}

const params = (32*256 + 256 + 256*256 + 256 + 256*10 + 10) * 4

// Sampling after each step: flat before the leak, the same growth each step after it,
// and the alert at the first step over the threshold, which stops the loop.
func TestAlertAtTheFirstStepOverTheThreshold(t *testing.T) {
	r := trainWith(t, "-every", "0", "-batch", "64", "-threshold", "2", "-leak-from", "10")
	require.Len(t, r.alerts, 1)
	al := r.alerts[0]
	assert.Equal(t, int(al.step), r.stopped, "the loop stops at the alert")
	require.Len(t, r.samples, r.stopped, "one sample per step")
	for i, s := range r.samples {
		assert.Equal(t, int64(i+1), s.step)
		assert.Equal(t, s.step == al.step, s.mem.Allocated > r.threshold, "step %d: the alert comes at the first step over", s.step)
	}
	for _, s := range r.samples[1:8] {
		assert.Equal(t, r.samples[0].mem.Allocated, s.mem.Allocated, "before the leak memory is flat")
	}
	growth := r.samples[11].mem.Allocated - r.samples[10].mem.Allocated
	assert.Positive(t, growth)
	assert.Equal(t, growth, al.perStep, "each kept step adds the same")
	assert.Equal(t, int64(2*params), r.held, "the parameters and the momentum")
	assert.Equal(t, r.held, r.after, "releasing the kept total frees every graph")
}

func TestNoLeakNoAlert(t *testing.T) {
	r := trainWith(t, "-every", "0", "-batch", "64", "-steps", "30", "-leak-from", "0")
	assert.Empty(t, r.alerts)
	assert.Equal(t, 30, r.stopped)
}

// The goroutine samples on its own; the alert stops the loop soon after the leak
// crosses the threshold.
func TestTheGoroutineRaisesTheAlert(t *testing.T) {
	r := trainWith(t, "-batch", "64", "-threshold", "2", "-leak-from", "5", "-steps", "1000")
	require.NotEmpty(t, r.alerts, "the leak grows without bound until the alert")
	assert.Greater(t, r.alerts[0].mem.Allocated, r.threshold)
	assert.Less(t, r.stopped, 1000)
	assert.GreaterOrEqual(t, int64(r.stopped), r.alerts[0].step)
	assert.Equal(t, r.held, r.after)
	// The growth it reports is the last completed step's, exactly, wherever in a step
	// the sample fell: what the same loop grows by a step when sampled after each.
	each := trainWith(t, "-every", "0", "-batch", "64", "-threshold", "2", "-leak-from", "5")
	require.NotEmpty(t, each.alerts)
	assert.Equal(t, each.alerts[0].perStep, r.alerts[0].perStep)
}

func TestRunPrints(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run([]string{"-every", "0", "-batch", "64", "-threshold", "2", "-leak-from", "10"}, &out))
	for _, want := range []string{"the loop sampled after each step", "ALERT at", "over the threshold of 2.00 MiB",
		"the loop stopped at step", "614480 bytes are held"} {
		assert.Contains(t, out.String(), want)
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-threshold", "0"}, {"-every", "-1ms"}, {"-leak-from", "-1"}, {"-steps", "0"}, {"extra"}} {
		assert.Error(t, run(args, io.Discard), "%v", args)
	}
}
