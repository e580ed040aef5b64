package pinned

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/internal/hostmem"
)

// fakeRegister is a fakePinned that also page-locks memory in place (in name: it keeps
// the ranges), failing with regErr or unregErr when set.
type fakeRegister struct {
	*fakePinned
	mu               sync.Mutex
	registered       map[uintptr]int
	regs, unregs     int
	regErr, unregErr error
	// tried is the last range HostRegister was given; onRegister, when set, sees each
	// range HostRegister accepts.
	tried      []byte
	onRegister func(b []byte)
}

func (f *fakeRegister) HostRegister(b []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tried = b
	if f.regErr != nil {
		return f.regErr
	}
	if _, ok := f.registered[base(b)]; ok {
		return fmt.Errorf("fake HostRegister(%#x): registered already", base(b))
	}
	if f.onRegister != nil {
		f.onRegister(b)
	}
	f.registered[base(b)] = len(b)
	f.regs++
	return nil
}

func (f *fakeRegister) HostUnregister(b []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unregErr != nil {
		return f.unregErr
	}
	if n, ok := f.registered[base(b)]; !ok || n != len(b) {
		return fmt.Errorf("fake HostUnregister(%#x, %d): not a registered range", base(b), len(b))
	}
	delete(f.registered, base(b))
	f.unregs++
	return nil
}

var _ device.HostRegisterer = (*fakeRegister)(nil)

// newRegister is a fakeRegister and an allocator over it with cfg.
func newRegister(t *testing.T, cfg alloc.PinnedConfig) (*fakeRegister, *Allocator) {
	t.Helper()
	return newOver(t, cfg, func(s *sim.Device) *fakeRegister {
		return &fakeRegister{fakePinned: &fakePinned{Device: s}, registered: make(map[uintptr]int)}
	})
}

func TestHostRegisterNeedsADeviceThatCan(t *testing.T) {
	d, err := sim.New(sim.Options{})
	require.NoError(t, err)
	_, err = NewConfig(d, alloc.PinnedConfig{UseHostRegister: true, NumRegisterThreads: 8})
	for _, w := range []string{"pinned.NewConfig on sim", "pinned_use_cuda_host_register (PinnedConfig.UseHostRegister)",
		"sim cannot page-lock ordinary host memory", "does not implement device.HostRegisterer", "unset it"} {
		assert.ErrorContains(t, err, w)
	}
}

// Blocks are mapped memory registered with the device, not its HostAlloc memory, and
// are unregistered before they are unmapped.
func TestHostRegisterBlocks(t *testing.T) {
	f, a := newRegister(t, alloc.PinnedConfig{UseHostRegister: true, NumRegisterThreads: 4})
	assert.True(t, a.Pinned())
	b := mustAlloc(t, a, 3000)
	assert.Equal(t, map[uintptr]int{base(b): int(hostmem.PageSize())}, f.registered, "one registration of the block's pages")
	assert.Zero(t, f.allocs, "HostAlloc is not used")
	b[2999] = 7
	big := mustAlloc(t, a, 3<<20)
	assert.Len(t, f.registered, 2)
	st := a.Stats()
	assert.Equal(t, 4096+int64(4<<20), st.AllocatedBytes.Current)
	require.NoError(t, a.Free(b))
	require.NoError(t, a.Free(big))
	again := mustAlloc(t, a, 4000)
	assert.Equal(t, base(b), base(again), "cached and reused, still registered")
	assert.Equal(t, 2, f.regs)
	require.NoError(t, a.Free(again))
	require.NoError(t, a.EmptyCache())
	assert.Empty(t, f.registered)
	assert.Equal(t, 2, f.unregs)
	requireEmpty(t, a)
}

// A failed registration unmaps the memory and is an error of Alloc (here out of memory:
// after the cache was released and the registration retried).
func TestHostRegisterFailure(t *testing.T) {
	f, a := newRegister(t, alloc.PinnedConfig{UseHostRegister: true})
	cached := mustAlloc(t, a, 64)
	require.NoError(t, a.Free(cached))
	f.regErr = fmt.Errorf("fake: no lockable memory: %w", device.ErrOutOfMemory)
	_, err := a.Alloc(1 << 20)
	require.ErrorIs(t, err, device.ErrOutOfMemory)
	assert.ErrorContains(t, err, "pinned: Alloc of a 1048576-byte block on sim")
	st := a.Stats()
	assert.Zero(t, st.AllocatedBytes.Current, "the cache was released for the retry")
	assert.Equal(t, int64(1), st.NumHostAlloc)
	assert.Empty(t, f.registered)
	f.regErr = nil
	requireEmpty(t, a)
}

// A block the device will not unregister stays cached, registered and usable.
func TestHostUnregisterFailure(t *testing.T) {
	f, a := newRegister(t, alloc.PinnedConfig{UseHostRegister: true})
	b := mustAlloc(t, a, 64)
	require.NoError(t, a.Free(b))
	f.unregErr = errBroken
	err := a.EmptyCache()
	require.ErrorIs(t, err, errBroken)
	assert.Len(t, f.registered, 1)
	assert.Equal(t, int64(64), a.Stats().AllocatedBytes.Current)
	again := mustAlloc(t, a, 64)
	assert.Equal(t, base(b), base(again))
	require.NoError(t, a.Free(again))
	f.unregErr = nil
	requireEmpty(t, a)
	assert.Empty(t, f.registered)
}

// The reserve segment is registered once; blocks carved from it are not registered.
func TestHostRegisterReserveSegment(t *testing.T) {
	f, a := newRegister(t, alloc.PinnedConfig{UseHostRegister: true, NumRegisterThreads: 2, ReserveSegmentSize: mib})
	assert.Equal(t, map[uintptr]int{a.segment(): int(mib)}, f.registered)
	b := mustAlloc(t, a, 1000)
	assert.Equal(t, 1, f.regs)
	require.NoError(t, a.Free(b))
	requireEmpty(t, a)
	assert.Empty(t, f.registered)
	assert.Equal(t, 1, f.unregs)
}

// The pages are split among the goroutines as in PyTorch: every page start is in
// exactly one range, one range per goroutine unless the memory is under a page each.
func TestPrefaultChunks(t *testing.T) {
	const page = 4096
	for _, c := range []struct {
		n       int64
		threads int
		ranges  int
	}{
		{page, 1, 1},
		{8 * page, 8, 8},
		{8*page - 1, 8, 1},
		{1<<20 + 1, 8, 8},
		{3*page + 5, 2, 2},
		{128 * page, 128, 128},
	} {
		chunks := prefaultChunks(c.n, page, c.threads)
		require.Len(t, chunks, c.ranges, "%+v", c)
		assert.Zero(t, chunks[0][0])
		assert.Equal(t, c.n, chunks[len(chunks)-1][1])
		for i := 1; i < len(chunks); i++ {
			assert.Equal(t, chunks[i-1][1], chunks[i][0], "contiguous")
		}
		seen := 0
		for _, ch := range chunks {
			for p := hostmem.RoundUp(ch[0], page); p < ch[1]; p += page {
				seen++
			}
		}
		assert.Equal(t, int((c.n+page-1)/page), seen, "each page once: %+v", c)
	}
}
