package memsnap

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/alloc"
)

func TestTimelineOfARecording(t *testing.T) {
	s := sampled(t) // 1 MiB (small pool: 2 MiB segment), then 2, 3, 4 MiB in a 20 MiB segment, then an OOM
	tl, err := TimelineOf(s, 0)
	require.NoError(t, err)
	require.Len(t, tl.Points, 8)
	assert.False(t, tl.Requested)
	type mem struct{ alloc, reserved, active int64 }
	var got []mem
	for _, p := range tl.Points {
		got = append(got, mem{p.Allocated, p.Reserved, p.Active})
		var sum int64
		for _, v := range p.BySite {
			sum += v
		}
		assert.Equal(t, p.Allocated, sum, "the sites add up to what is allocated")
	}
	const M = 1 << 20
	assert.Equal(t, []mem{{0, 2 * M, 0}, {M, 2 * M, M}, {M, 22 * M, M}, {3 * M, 22 * M, 3 * M}, {6 * M, 22 * M, 6 * M},
		{10 * M, 22 * M, 10 * M}, {10 * M, 22 * M, 10 * M}, {10 * M, 22 * M, 10 * M}}, got)
	assert.Equal(t, []int{6}, tl.OOMs)
	require.Len(t, tl.Sites, 1, "one line allocated everything (inside package alloc, so named by its op alone)")
	assert.Equal(t, "Add", tl.Sites[0])
	assert.Equal(t, s.Devices[0].Stats["allocated_bytes.all.current"], tl.Points[7].Allocated)

	// A ring that dropped the start: the blocks allocated before are "before the trace".
	s.DeviceTraces[0] = s.DeviceTraces[0][4:]
	tl, err = TimelineOf(s, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"Add", Before}, tl.Sites)
	assert.Equal(t, []int64{7 * M, 3 * M}, tl.Points[1].BySite, "3 and 4 MiB from the site, 1 and 2 MiB from before")

	// A trace that cannot lead to the segments.
	s.DeviceTraces[0] = append([]TraceEntry{{Action: "alloc", Size: 64 * M}}, s.DeviceTraces[0]...)
	_, err = TimelineOf(s, 0)
	assert.ErrorContains(t, err, "device_traces[0][0]: memory before it would be negative")
	_, err = TimelineOf(s, 3)
	assert.ErrorContains(t, err, "no device 3 in the snapshot (it has devices 0 to 0)")
}

func TestSiteLabel(t *testing.T) {
	fr := []alloc.Frame{
		{Name: "github.com/subletml/sublet/tensor.(*call).alloc", Filename: "/x/tensor/op.go", Line: 160},
		{Name: "github.com/subletml/sublet/tensor.MatMul", Filename: "/x/tensor/matmul.go", Line: 20},
		{Name: "github.com/subletml/sublet/examples/mlp.train", Filename: "/x/examples/mlp/main.go", Line: 77},
	}
	assert.Equal(t, "MatMul @ mlp.train (main.go:77)", SiteLabel(fr, "MatMul"))
	assert.Equal(t, "mlp.train (main.go:77)", SiteLabel(fr, ""))
	assert.Equal(t, "MatMul", SiteLabel(fr[:2], "MatMul"))
	assert.Equal(t, "(no stack)", SiteLabel(nil, ""))
}
