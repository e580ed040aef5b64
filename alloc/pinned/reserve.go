package pinned

import (
	"fmt"
	"sync"

	"github.com/subletml/sublet/internal/hostmem"
)

// reserve is the segment of pinned_reserve_segment_size_mb, taken from the source by New
// so that later blocks need no call to the system. As in PyTorch's ReserveSegment, new
// blocks are carved from it one after another while it has room (a bump allocator);
// carved blocks are cached like any other, but never go back to the system one by one.
// EmptyCache drops them and starts carving from the beginning again once every carved
// block is in the cache (PyTorch keeps them for good); Close returns the segment.
type reserve struct {
	mu sync.Mutex
	// Guarded by mu. mem is the segment as the source returned it (nil without one, or
	// after Close); size is the bytes blocks may be carved from (the setting, at most
	// len(mem)); off is the bytes carved so far; carved counts the blocks carved since
	// the last rewind.
	mem    []byte
	size   int64
	off    int64
	carved int
}

// takeReserve takes the segment from the source.
func (a *Allocator) takeReserve(size int64) error {
	mem, err := a.src.alloc(size)
	if err != nil {
		return err
	}
	a.reserve.mem, a.reserve.size = mem, size
	a.countHostAlloc(size)
	return nil
}

// carve returns size bytes from the segment, aligned to the smaller of size (a power of
// two there) and a page, or nil when it has no room.
func (r *reserve) carve(size int64) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	off := hostmem.RoundUp(r.off, min(size, hostmem.PageSize()))
	if r.mem == nil || off+size > r.size {
		return nil
	}
	r.off = off + size
	r.carved++
	return r.mem[off : off+size : off+size]
}

// rewind forgets the carved blocks, which the caller has taken out of the cache, and
// starts carving from the beginning again, provided they are all the blocks carved so
// far. Otherwise (some are in use or parked) it reports false and the caller caches them
// again.
func (a *Allocator) rewind(carved []*block) bool {
	r := &a.reserve
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(carved) != r.carved {
		return false
	}
	// Under r.mu, so that no block carved after the rewind is registered before these
	// are forgotten.
	a.blocksMu.Lock()
	for _, b := range carved {
		delete(a.blocks, base(b.mem))
	}
	a.blocksMu.Unlock()
	r.off, r.carved = 0, 0
	return true
}

// releaseReserve returns the segment to the system; Close calls it once no block is
// left. A segment the system does not take back is kept (and counted), and the error
// says so.
func (a *Allocator) releaseReserve() error {
	r := &a.reserve
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mem == nil {
		return nil
	}
	if err := a.src.free(r.mem); err != nil {
		return fmt.Errorf("pinned: Close: returning the %d-byte reserve segment to the system (it stays held): %w", r.size, err)
	}
	a.countHostFree(r.size)
	r.mem, r.size, r.off, r.carved = nil, 0, 0, 0
	return nil
}
