package cpu

import (
	"testing"

	"github.com/subletml/sublet/device"
)

// benchDevice holds n live 4 KiB allocations, the lookups' haystack.
func benchDevice(b *testing.B, n int) (*Device, []device.Ptr) {
	d, err := New(Options{Capacity: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	ps := make([]device.Ptr, n)
	for i := range ps {
		if ps[i], err = d.Malloc(4096); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		for _, p := range ps {
			if err := d.Free(p); err != nil {
				b.Error(err)
			}
		}
	})
	return d, ps
}

func BenchmarkBytes(b *testing.B) {
	d, ps := benchDevice(b, 1024)
	b.ResetTimer()
	for i := range b.N {
		if _, ok := d.Bytes(ps[(i*613)%len(ps)]+64, 256); !ok {
			b.Fatal("lookup failed")
		}
	}
}

func BenchmarkBytesParallel(b *testing.B) {
	d, ps := benchDevice(b, 1024)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			if _, ok := d.Bytes(ps[(i*613)%len(ps)]+64, 256); !ok {
				b.Error("lookup failed")
				return
			}
		}
	})
}

func BenchmarkMallocFree(b *testing.B) {
	d, _ := benchDevice(b, 0)
	for range b.N {
		p, err := d.Malloc(1 << 20)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Free(p); err != nil {
			b.Fatal(err)
		}
	}
}
