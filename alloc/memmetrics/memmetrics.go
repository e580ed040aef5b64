// Package memmetrics exports every device's allocator statistics to Prometheus:
//
//	prometheus.MustRegister(memmetrics.NewCollector(nil)) // nil: alloc.Registered
//	http.Handle("/metrics", promhttp.Handler())
//
// Each key of PyTorch's memory_stats() (alloc.Stats.Map) is a metric named sublet_ + the
// key with dots made underscores, labelled by device: allocated_bytes.all.current is
// sublet_allocated_bytes_all_current{device="cuda:0"}. Keys ending in .allocated or
// .freed and the num_* event counts are counters (ResetAccumulatedStats restarts them,
// which Prometheus reads as a counter reset); the rest are gauges. Beside them:
//
//	sublet_device_free_bytes, sublet_device_total_bytes   the device's MemInfo
//	sublet_reserved_unallocated_bytes                     reserved − allocated: cached
//	sublet_fragmentation_ratio                            that share of reserved (0 when none)
//
// inactive split bytes, the cache no EmptyCache can return, are
// sublet_inactive_split_bytes_all_current, and OOMs sublet_num_ooms.
package memmetrics

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/subletml/sublet/alloc"
)

// Collector collects the statistics of the allocators its list returns, read at each
// scrape.
type Collector struct {
	list func() []*alloc.Allocator

	mu sync.Mutex
	// descs caches a description per metric name. Guarded by mu.
	descs map[string]*prometheus.Desc
}

// NewCollector returns a collector of list's allocators; nil lists alloc.Registered,
// every device the program has used.
func NewCollector(list func() []*alloc.Allocator) *Collector {
	if list == nil {
		list = alloc.Registered
	}
	return &Collector{list: list, descs: make(map[string]*prometheus.Desc)}
}

// Describe sends nothing: the metrics depend on the devices present at the scrape,
// which makes this an unchecked collector.
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// MetricName is the Prometheus name of a memory_stats() key.
func MetricName(key string) string { return "sublet_" + strings.ReplaceAll(key, ".", "_") }

// isCounter reports whether the key only grows between resets.
func isCounter(key string) bool {
	return strings.HasPrefix(key, "num_") || strings.HasSuffix(key, ".allocated") || strings.HasSuffix(key, ".freed")
}

func (c *Collector) desc(name, help string) *prometheus.Desc {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.descs[name]
	if !ok {
		d = prometheus.NewDesc(name, help, []string{"device"}, nil)
		c.descs[name] = d
	}
	return d
}

// Collect sends every allocator's metrics. Devices of one name (every simulated device
// is "sim") are told apart in the list's order: the second is NAME#2, and so on.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	seen := map[string]int{}
	for _, a := range c.list() {
		dev := a.Device().Name()
		if seen[dev]++; seen[dev] > 1 {
			dev = fmt.Sprintf("%s#%d", dev, seen[dev])
		}
		st := a.Stats()
		m := st.Map()
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			t := prometheus.GaugeValue
			if isCounter(k) {
				t = prometheus.CounterValue
			}
			ch <- prometheus.MustNewConstMetric(c.desc(MetricName(k), "PyTorch memory_stats() key "+k), t, float64(m[k]), dev)
		}
		reserved, allocated := st.ReservedBytes[alloc.StatAll].Current, st.AllocatedBytes[alloc.StatAll].Current
		ch <- prometheus.MustNewConstMetric(c.desc("sublet_reserved_unallocated_bytes", "memory reserved from the device and not allocated (cached)"),
			prometheus.GaugeValue, float64(reserved-allocated), dev)
		ratio := 0.0
		if reserved > 0 {
			ratio = float64(reserved-allocated) / float64(reserved)
		}
		ch <- prometheus.MustNewConstMetric(c.desc("sublet_fragmentation_ratio", "share of reserved memory that is not allocated"),
			prometheus.GaugeValue, ratio, dev)
		if free, total, err := a.Device().MemInfo(); err == nil {
			ch <- prometheus.MustNewConstMetric(c.desc("sublet_device_free_bytes", "the device's free memory"), prometheus.GaugeValue, float64(free), dev)
			ch <- prometheus.MustNewConstMetric(c.desc("sublet_device_total_bytes", "the device's total memory"), prometheus.GaugeValue, float64(total), dev)
		}
	}
}
