package memmetrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device/sim"
)

func TestCollectorReportsEveryKey(t *testing.T) {
	d, err := sim.New(sim.Options{Capacity: 64 << 20, Cost: &sim.CostModel{}})
	require.NoError(t, err)
	a, err := alloc.New(d, alloc.Config{})
	require.NoError(t, err)
	p, err := a.Alloc(1<<20, 0) // 1 MiB in a 2 MiB small segment: 1 MiB cached
	require.NoError(t, err)
	_, err = a.Alloc(100<<20, 0)
	require.Error(t, err)
	c := NewCollector(func() []*alloc.Allocator { return []*alloc.Allocator{a} })
	want := `
# HELP sublet_fragmentation_ratio share of reserved memory that is not allocated
# TYPE sublet_fragmentation_ratio gauge
sublet_fragmentation_ratio{device="sim"} 0.5
# HELP sublet_num_ooms PyTorch memory_stats() key num_ooms
# TYPE sublet_num_ooms counter
sublet_num_ooms{device="sim"} 1
# HELP sublet_reserved_unallocated_bytes memory reserved from the device and not allocated (cached)
# TYPE sublet_reserved_unallocated_bytes gauge
sublet_reserved_unallocated_bytes{device="sim"} 1.048576e+06
# HELP sublet_device_total_bytes the device's total memory
# TYPE sublet_device_total_bytes gauge
sublet_device_total_bytes{device="sim"} 6.7108864e+07
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want),
		"sublet_fragmentation_ratio", "sublet_num_ooms", "sublet_reserved_unallocated_bytes", "sublet_device_total_bytes"))
	st := a.Stats()
	assert.Equal(t, len(st.Map())+4, testutil.CollectAndCount(c), "every memory_stats() key, and the four of memmetrics")
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	_, err = reg.Gather()
	require.NoError(t, err, "the metrics are consistent")
	require.NoError(t, a.Free(p))
	require.NoError(t, a.EmptyCache())
	assert.Zero(t, a.Stats().ReservedBytes[alloc.StatAll].Current)
	assert.Equal(t, "sublet_allocated_bytes_all_current", MetricName("allocated_bytes.all.current"))
}

// Two devices of one name (every simulated device is "sim") are two label values, in
// the list's order, stable from scrape to scrape: Prometheus refuses a metric collected
// twice with the same labels, which failed the whole /metrics.
func TestDevicesOfOneName(t *testing.T) {
	var as []*alloc.Allocator
	for range 2 {
		d, err := sim.New(sim.Options{Capacity: 64 << 20, Cost: &sim.CostModel{}})
		require.NoError(t, err)
		a, err := alloc.New(d, alloc.Config{})
		require.NoError(t, err)
		as = append(as, a)
	}
	p, err := as[1].Alloc(1<<20, 0)
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(NewCollector(func() []*alloc.Allocator { return as })))
	want := `
# HELP sublet_allocated_bytes_all_current PyTorch memory_stats() key allocated_bytes.all.current
# TYPE sublet_allocated_bytes_all_current gauge
sublet_allocated_bytes_all_current{device="sim"} 0
sublet_allocated_bytes_all_current{device="sim#2"} 1.048576e+06
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "sublet_allocated_bytes_all_current"))
	require.NoError(t, as[1].Free(p))
	require.NoError(t, as[1].EmptyCache())
	assert.Zero(t, as[1].Stats().ReservedBytes[alloc.StatAll].Current)
}
