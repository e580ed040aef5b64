package alloc_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc/alloctest"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/device/sim"
)

// The allocator conformance suite on the host devices; device/cuda runs it on a GPU.

func simTarget(t *testing.T, o sim.Options) alloctest.Target {
	d, err := sim.New(o)
	require.NoError(t, err)
	return alloctest.Target{
		Dev:          d,
		InUse:        func() int64 { return d.Stats().InUse },
		ExactMemInfo: true,
		KeepsData:    o.Backing,
		Hold: func(t *testing.T, s device.Stream) func() {
			require.NoError(t, d.HoldStream(s))
			return func() { require.NoError(t, d.ReleaseStream(s)) }
		},
	}
}

func TestConformanceSim(t *testing.T) {
	alloctest.Run(t, func(t *testing.T) alloctest.Target {
		return simTarget(t, sim.Options{Cost: &sim.CostModel{}}) // a meta H200
	})
}

func TestConformanceSimBacked(t *testing.T) {
	alloctest.Run(t, func(t *testing.T) alloctest.Target {
		return simTarget(t, sim.Options{Capacity: 1 << 30, Occupied: 100 << 20, Backing: true, Cost: &sim.CostModel{}})
	})
}

func TestConformanceCPU(t *testing.T) {
	alloctest.Run(t, func(t *testing.T) alloctest.Target {
		d, err := cpu.New(cpu.Options{Capacity: 512 << 20})
		require.NoError(t, err)
		return alloctest.Target{
			Dev: d,
			InUse: func() int64 {
				free, total, err := d.MemInfo()
				require.NoError(t, err)
				return total - free
			},
			ExactMemInfo: true,
			KeepsData:    true,
		}
	})
}
