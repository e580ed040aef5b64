package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// compare replays the trace through both policies: PyTorch's row is what sublet replay
// says with the same settings, and the planned policy reserves no more on the blog's
// pattern, where it stitches pages.
func TestCompare(t *testing.T) {
	trace := "../../testdata/traces/blog.jsonl.gz"
	code, out, errs := sublet("compare", "-trace", trace, "-conf", "", "-json")
	require.Equal(t, 0, code, errs)
	var c compareOutput
	require.NoError(t, json.Unmarshal([]byte(out), &c))
	require.Len(t, c.Policies, 2)
	assert.Equal(t, "sim", c.Device)
	assert.Equal(t, "-conf", c.ConfFrom)
	py, pl := c.Policies[0], c.Policies[1]
	assert.Equal(t, "pytorch", py.Policy)
	assert.Equal(t, "planned", pl.Policy)

	code, out, errs = sublet("replay", "-trace", trace, "-conf", "")
	require.Equal(t, 0, code, errs)
	var r replayOutput
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	assert.Equal(t, r.Final["reserved_bytes.all.peak"], py.PeakReserved)
	assert.Equal(t, r.Final["allocated_bytes.all.peak"], py.PeakAllocated)
	assert.Equal(t, r.Final["num_device_alloc"], py.DeviceAllocs)
	assert.Equal(t, r.Events, c.Events)
	assert.InDelta(t, float64(py.PeakReserved)/float64(py.PeakAllocated), py.Ratio, 1e-12)
	assert.LessOrEqual(t, pl.PeakReserved, py.PeakReserved)
	// sublet replay -conf policy:planned is the planned row.
	code, out, errs = sublet("replay", "-trace", trace, "-conf", "policy:planned")
	require.Equal(t, 0, code, errs)
	r = replayOutput{}
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	assert.Equal(t, r.Final["reserved_bytes.all.peak"], pl.PeakReserved)
	assert.Equal(t, r.Final["num_device_free"], pl.DeviceFrees)
	assert.Equal(t, "policy:planned", r.Conf)
	assert.Zero(t, py.Plans+py.Served, "PyTorch's policy plans nothing")
	for _, p := range c.Policies {
		assert.Positive(t, p.NsPerAlloc, p.Policy)
		assert.Zero(t, p.OOMs, p.Policy)
	}

	code, out, errs = sublet("compare", "-trace", trace)
	require.Equal(t, 0, code, errs)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	assert.Contains(t, lines[0], "blog.jsonl.gz: ")
	assert.Contains(t, lines[1], "reserved/allocated")
	assert.Contains(t, lines[2], "pytorch")
	assert.Contains(t, lines[3], "planned")
}

// A -conf that names a policy is overridden row by row; bad usage is said as for replay.
func TestCompareErrors(t *testing.T) {
	code, _, errs := sublet("compare")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "compare: give one trace")
	code, _, errs = sublet("compare", "-trace", "../../testdata/traces/blog.jsonl.gz", "-conf", "policy:nope")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "policy 'nope' is unknown")
	code, _, errs = sublet("compare", "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, errs, "usage: sublet compare")
}
