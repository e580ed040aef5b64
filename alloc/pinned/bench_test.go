package pinned

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

// BenchmarkAllocFreeMmap is the fallback over the simulated device.
func BenchmarkAllocFreeMmap(b *testing.B) {
	s, err := sim.New(sim.Options{})
	require.NoError(b, err)
	benchAllocFree(b, s)
}

// BenchmarkAllocFreeCUDA uses cuMemHostAlloc memory; it runs where there is a GPU.
func BenchmarkAllocFreeCUDA(b *testing.B) {
	d := openGPU(b)
	b.ResetTimer()
	benchAllocFree(b, d)
}

// benchAllocFree times a cached 1 MiB Alloc+Free pair from every P at once: the path a
// training loop's staging buffers take once warm.
func benchAllocFree(b *testing.B, d device.Device) {
	a, err := New(d)
	require.NoError(b, err)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m, err := a.Alloc(1 << 20)
			if err != nil {
				b.Fatal(err)
			}
			if err := a.Free(m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.StopTimer()
	require.NoError(b, a.Close())
}
