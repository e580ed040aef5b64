package pinned

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

// BenchmarkAllocFree is a cached Alloc+Free pair: the path a training loop's staging
// buffers take once warm. "mmap" is the fallback over the simulated device; "cuda" uses
// cuMemHostAlloc memory and runs where there is a GPU.
func BenchmarkAllocFree(b *testing.B) {
	s, err := sim.New(sim.Options{})
	require.NoError(b, err)
	b.Run("mmap", func(b *testing.B) { benchAllocFree(b, s) })
	b.Run("cuda", func(b *testing.B) { benchAllocFree(b, openGPU(b)) })
}

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
	require.NoError(b, a.Close())
}
