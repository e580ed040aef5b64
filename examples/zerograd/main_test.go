package main

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/tensor/tensortest"
)

// trainAll runs the four ways on a fresh device named dev.
func trainAll(t *testing.T, dev string, args ...string) (config, [numWays]cost) {
	t.Helper()
	c, err := parseFlags(args, io.Discard)
	require.NoError(t, err)
	d, a, hasData, err := demo.Open(dev)
	require.NoError(t, err)
	data := newTask(c, hasData)
	var costs [numWays]cost
	for w := range numWays {
		require.NoError(t, demo.Try(d, func() error { costs[w], err = train(c, d, a, data, w, hasData); return err }), wayNames[w])
		assert.Zero(t, demo.Read(a).Requested, "%s released everything", wayNames[w])
	}
	tensortest.RequireEmpty(t, d)
	return c, costs
}

// At the seed's size on the meta device: what each way holds between steps, exactly.
func TestMemoryOfEachWay(t *testing.T) {
	c, costs := trainAll(t, "sim", "-steps", "4")
	const p = (1000*1000 + 1000) * 4 // the weight and the bias; a gradient or a momentum buffer is as much
	each := func(v int64) []int64 { return []int64{v, v, v, v} }
	assert.Equal(t, each(2*p), costs[setToNone].held, "parameters and momentum")
	assert.Equal(t, each(3*p), costs[zeroed].held, "and the gradients, zeroed")
	assert.Equal(t, each(3*p), costs[recreate].held, "one model's parameters, gradients and momentum")
	assert.Equal(t, []int64{3 * p, 6 * p, 9 * p, 12 * p}, costs[recreateLeak].held, "every model's")

	assert.Equal(t, costs[setToNone].allocations, costs[zeroed].allocations,
		"zeroed gradients still take a block per backward: the new gradient is added into them")
	assert.Equal(t, costs[setToNone].allocations+4*int64(c.steps-1), costs[recreate].allocations,
		"new parameters take two blocks a step, their momentum two more")
	assert.Equal(t, costs[recreate].allocations, costs[recreateLeak].allocations)
	assert.Equal(t, costs[setToNone].peak+p, costs[zeroed].peak, "the kept gradients are on top of the same peak")
	assert.Equal(t, int64(3*p), costs[recreate].peak, "no momentum survives a step: the peak is one model's state at Step")
	for _, w := range []way{setToNone, zeroed, recreate} {
		assert.Zero(t, costs[w].deviceAllocs, "%s: after the first step the cache serves every block", wayNames[w])
	}
	assert.Positive(t, costs[recreateLeak].deviceAllocs, "leaked models need new segments")
}

func TestOnlyReusedParametersLearn(t *testing.T) {
	_, costs := trainAll(t, "cpu", "-width", "32", "-batch", "64", "-steps", "20", "-lr", "0.05")
	last := func(w way) float64 { l := costs[w].losses; return l[len(l)-1] }
	assert.Equal(t, costs[setToNone].losses, costs[zeroed].losses, "dropping or zeroing the gradients trains the same")
	assert.Less(t, last(setToNone), costs[setToNone].losses[0]/2, "the reused model learns")
	assert.Greater(t, last(recreate), 2*last(setToNone), "a new model every step does not")
	assert.Equal(t, costs[recreate].losses, costs[recreateLeak].losses)
}

func TestRunPrintsTheTable(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run([]string{"-width", "64", "-steps", "3"}, &out))
	for _, want := range []string{
		"Linear(64→64) fitted to a random linear map",
		"ZeroGrad(true)", "ZeroGrad(false)", "new each step", "new, not released",
		"held after the last step", "blocks allocated per step", "device allocations in 2 steps",
		"loss, first step → last",
		"the parameters are 16.25 KiB",
	} {
		assert.Contains(t, out.String(), want)
	}
	out.Reset()
	require.NoError(t, run([]string{"-device", "sim", "-steps", "2"}, &out))
	assert.Contains(t, out.String(), "sim keeps no data")
	assert.NotContains(t, out.String(), "loss, first")
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-width", "0"}, {"-steps", "1"}, {"-lr", "0"}, {"-batch", "0"}, {"-device", "tpu"}, {"extra"},
	} {
		assert.Error(t, run(args, io.Discard), "%v", args)
	}
}
