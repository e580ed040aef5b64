package sim

import (
	"testing"

	"github.com/subletml/sublet/device"
)

// BenchmarkMallocFree: one 20 MiB Malloc and Free among n live segments of the meta
// device (the top-down placement scans the live granule runs).
func BenchmarkMallocFree(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(map[int]string{0: "empty", 1000: "1000live"}[n], func(b *testing.B) {
			d, err := New(Options{Cost: &CostModel{}})
			if err != nil {
				b.Fatal(err)
			}
			live := make([]device.Ptr, n)
			for i := range live {
				if live[i], err = d.Malloc(20 << 20); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				p, err := d.Malloc(20 << 20)
				if err != nil {
					b.Fatal(err)
				}
				if err := d.Free(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCopyCheckMeta(b *testing.B) {
	d, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	p, err := d.Malloc(1 << 20)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 4096)
	b.ResetTimer()
	for range b.N {
		if err := d.CopyToDevice(p+512, buf, 0); err != nil {
			b.Fatal(err)
		}
	}
}
