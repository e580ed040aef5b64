package alloc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cpu"
)

// On the CPU device the blocks handed out are real memory: each can be written whole
// without touching its neighbours, with fixed segments and with expandable ones.
func TestCPUDeviceBlocksAreUsableMemory(t *testing.T) {
	for _, cfg := range []Config{{}, {ExpandableSegments: true}} {
		d, err := cpu.New(cpu.Options{Capacity: 256 * MiB})
		require.NoError(t, err)
		a, err := New(d, cfg)
		require.NoError(t, err)
		assert.Equal(t, cfg.ExpandableSegments, a.Config().ExpandableSegments)
		sizes := []int64{100, 4096, 700 * KiB, 3 * MiB, 12*MiB + 1, 25 * MiB}
		ps := make([]device.Ptr, len(sizes))
		for i, n := range sizes {
			ps[i] = mustAlloc(t, a, n, 0)
			b, ok := d.Bytes(ps[i], n)
			require.True(t, ok, "block %d of %d bytes is mapped memory", i, n)
			for j := range b {
				b[j] = byte(i + 1)
			}
		}
		for i, n := range sizes {
			b, _ := d.Bytes(ps[i], n)
			assert.Equal(t, byte(i+1), b[0])
			assert.Equal(t, byte(i+1), b[n-1])
		}
		mustFree(t, a, ps...)
		require.NoError(t, a.EmptyCache())
		checkInvariants(t, a)
		st := a.Stats()
		assert.Zero(t, cur(st.AllocatedBytes))
		assert.Zero(t, cur(st.ReservedBytes))
		free, total, err := d.MemInfo()
		require.NoError(t, err)
		assert.Equal(t, int64(256*MiB), total)
		assert.LessOrEqual(t, free, total)
	}
}
