package cuda

import (
	"errors"
	"fmt"
	"sync"

	"github.com/subletml/sublet/device"
)

// scratchBytes is the device memory each stream's scratch holds: the partial results of
// reductions cut into pieces, cross-entropy's block parts, NonFinite's answer. Piece counts are
// bounded so that partials fit (see pieceCount); the bound depends on the shapes only,
// so results stay deterministic.
const scratchBytes = 4 << 20

// ticketBytes follow a scratch's scratchBytes: the ticket counters of kernels whose
// last block finishes the op (cross-entropy's forward), zeroed when the scratch is made
// and set back to zero by each such last block, so that a replayed CUDA graph finds
// them zero. No other use of the scratch reaches them.
const ticketBytes = 256

// scratch is one stream's scratch memory, raw device memory outside the caching
// allocator: it is the backend's own, like cuBLAS's handle state, so that ops make no
// allocation the device-independent memory accounting (sim) does not make too.
type scratch struct {
	// mu is held by an op across the launches that use the scratch: two ops on one
	// stream from two goroutines would otherwise interleave their partials.
	mu  sync.Mutex
	ptr device.Ptr // guarded by mu; 0 until first use and after Release
}

// ticket is the address of the scratch's ticket counter (an unsigned int).
func (sc *scratch) ticket() device.Ptr { return sc.ptr + scratchBytes }

// useScratch locks stream s's scratch, allocating it on first use, and returns it; the
// caller unlocks sc.mu when its launches are made. If it cannot be allocated the error
// is kept for Check and ok is false (nothing is locked).
func (b *Backend) useScratch(s device.Stream) (sc *scratch, ok bool) {
	b.mu.Lock()
	sc = b.scratch[s]
	if sc == nil {
		sc = &scratch{}
		b.scratch[s] = sc
	}
	b.mu.Unlock()
	sc.mu.Lock()
	if sc.ptr == 0 {
		ptr, err := b.malloc(scratchBytes + ticketBytes)
		if err == nil {
			if err = b.memset(ptr+scratchBytes, ticketBytes, s); err != nil {
				err = errors.Join(err, b.free(ptr))
			}
		}
		if err != nil {
			sc.mu.Unlock()
			b.fault(fmt.Errorf("kernels/cuda: %s: scratch for stream %#x: %w", b.name(), uintptr(s), err))
			return nil, false
		}
		sc.ptr = ptr
	}
	return sc, true
}

// partials returns stream s's scratch, locked, for an op cut into pieces > 1 (the
// caller unlocks sc.mu when its launches are made), or nil for one piece, which needs
// none. ok is false when the scratch cannot be had (the fault is kept for Check): the
// op launches nothing.
func (b *Backend) partials(s device.Stream, pieces int64) (sc *scratch, ok bool) {
	if pieces <= 1 {
		return nil, true
	}
	return b.useScratch(s)
}

// addr is the scratch's address, 0 for none.
func (sc *scratch) addr() uint64 {
	if sc == nil {
		return 0
	}
	return uint64(sc.ptr)
}

// unlock unlocks a scratch partials locked.
func (sc *scratch) unlock() {
	if sc != nil {
		sc.mu.Unlock()
	}
}

// PrepareStream takes now what the kernels would otherwise take on their first use on
// stream s: its scratch, a cuBLAS handle set to s with s's workspace (when cuBLAS is
// there), the error flag. A graph capture of s calls it first (tensor.CaptureGraph):
// inside a capture nothing may wait for the device, and a graph's kernels address
// these blocks, which must not come from the capture's private pool.
func (b *Backend) PrepareStream(s device.Stream) error {
	sc, ok := b.useScratch(s)
	if !ok {
		return b.Check()
	}
	sc.mu.Unlock()
	b.flagMu.Lock()
	err := b.makeFlag()
	b.flagMu.Unlock()
	if err != nil {
		return err
	}
	l, err := b.blasLib()
	if err != nil {
		return nil // no cuBLAS: the products fall back to this package's kernels
	}
	h, err := b.blas.acquire(l, s)
	if err != nil {
		return err
	}
	b.blas.put(h)
	return nil
}
