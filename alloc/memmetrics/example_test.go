package memmetrics_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/alloc/memmetrics"
	"github.com/subletml/sublet/device/sim"
)

// A service registers one collector (nil lists every device's allocator, alloc.For's)
// and serves /metrics with promhttp.Handler(). Here a registry is gathered by hand and
// a few of the metrics printed.
func Example() {
	dev, _ := sim.New(sim.Options{Capacity: 1 << 30})
	a, _ := alloc.New(dev, alloc.Config{})
	p, _ := a.Alloc(1000, 0)

	reg := prometheus.NewRegistry()
	reg.MustRegister(memmetrics.NewCollector(func() []*alloc.Allocator { return []*alloc.Allocator{a} }))
	families, _ := reg.Gather()
	for _, f := range families {
		switch f.GetName() {
		case "sublet_allocated_bytes_all_current", "sublet_reserved_bytes_all_current", "sublet_fragmentation_ratio":
			m := f.GetMetric()[0]
			fmt.Printf("%s{device=%q} %g\n", f.GetName(), m.GetLabel()[0].GetValue(), m.GetGauge().GetValue())
		}
	}
	_ = a.Free(p)
	_ = a.EmptyCache()
	// Output:
	// sublet_allocated_bytes_all_current{device="sim"} 1024
	// sublet_fragmentation_ratio{device="sim"} 0.99951171875
	// sublet_reserved_bytes_all_current{device="sim"} 2.097152e+06
}
