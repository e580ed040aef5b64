package pinned

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

// BenchmarkAllocFreeMmap is the fallback over the simulated device.
func BenchmarkAllocFreeMmap(b *testing.B) {
	s, err := sim.New(sim.Options{})
	require.NoError(b, err)
	benchAllocFree(b, s, alloc.PinnedConfig{})
}

// BenchmarkAllocFreeMmapSettings is the fallback with the background goroutine, a
// reserve segment the blocks are carved from, and both size limits: the cached path
// should cost what it costs without them.
func BenchmarkAllocFreeMmapSettings(b *testing.B) {
	s, err := sim.New(sim.Options{})
	require.NoError(b, err)
	benchAllocFree(b, s, alloc.PinnedConfig{UseBackgroundThreads: true, ReserveSegmentSize: 64 << 20,
		MaxRoundThreshold: 4 << 20, MaxCachedSize: 16 << 20})
}

// BenchmarkAllocFreeCUDA uses cuMemHostAlloc memory; it runs where there is a GPU.
func BenchmarkAllocFreeCUDA(b *testing.B) {
	d := openGPU(b)
	b.ResetTimer()
	benchAllocFree(b, d, alloc.PinnedConfig{})
}

// benchAllocFree times a cached 1 MiB Alloc+Free pair from every P at once: the path a
// training loop's staging buffers take once warm.
func benchAllocFree(b *testing.B, d device.Device, cfg alloc.PinnedConfig) {
	a, err := NewConfig(d, cfg)
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
