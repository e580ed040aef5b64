package alloc

import (
	"testing"

	"github.com/subletml/sublet/device"
)

// BenchmarkPairHistory is BenchmarkPair's 512-byte pair with memory history off, on
// with stacks only (PyTorch's enabled="state") and on with the trace ring ("all"),
// each call captured through AllocTagged with an op tag as the tensor package passes
// one. "off" against BenchmarkPair/512B shows what history costs when off.
func BenchmarkPairHistory(b *testing.B) {
	for _, c := range []struct {
		name string
		on   bool
		opts HistoryOptions
	}{
		{"off", false, HistoryOptions{}},
		{"state", true, HistoryOptions{}},
		{"trace", true, HistoryOptions{Trace: true, MaxEntries: 4096}},
	} {
		b.Run(c.name, func(b *testing.B) {
			a, d := newAlloc(b, 0, Config{})
			if c.on {
				if err := a.RecordHistory(c.opts); err != nil {
					b.Fatal(err)
				}
			}
			tag := Tag{Op: "MatMul"}
			benchPairs(b, a, func() (device.Ptr, error) { return a.AllocTagged(512, 0, tag) })
			requireDrained(b, a, d)
		})
	}
}
