package alloc

import (
	"cmp"
	"slices"

	"github.com/subletml/sublet/device"
)

// BlockState is the state of a block in a Snapshot, PyTorch's snapshot "state".
type BlockState uint8

const (
	// Inactive is a cached free block.
	Inactive BlockState = iota
	// ActiveAllocated is a live allocation.
	ActiveAllocated
	// ActivePendingFree is a freed block waiting for other streams' work to complete.
	ActivePendingFree
)

func (s BlockState) String() string {
	switch s {
	case ActiveAllocated:
		return "active_allocated"
	case ActivePendingFree:
		return "active_pending_free"
	}
	return "inactive"
}

// BlockInfo describes one block of a segment.
type BlockInfo struct {
	Address device.Ptr
	Size    int64
	// Requested is the caller's size for an active block, 0 for an inactive one.
	Requested int64
	State     BlockState
	// Frames and Tag are where an active block was allocated, when the memory history
	// recorded it (RecordHistory); empty otherwise. Frames start at the caller of Alloc.
	Frames []Frame
	Tag    Tag
	// site is the history's site of the block while the snapshot is assembled.
	site int32
}

// SegmentInfo describes one segment, as in torch.cuda.memory_snapshot(): a raw device
// allocation, or one contiguous mapped range of an expandable segment.
type SegmentInfo struct {
	Address   device.Ptr
	TotalSize int64
	// AllocatedSize, ActiveSize and RequestedSize sum the blocks' sizes (requested
	// sizes) over the allocated and the active blocks.
	AllocatedSize, ActiveSize, RequestedSize int64
	Stream                                   device.Stream
	// Pool is "small" or "large".
	Pool       string
	Expandable bool
	// Blocks are the segment's blocks in address order; they tile it.
	Blocks []BlockInfo
}

// Snapshot describes every segment and its blocks, sorted by address; with memory
// history on, each active block says where it was allocated.
func (a *Allocator) Snapshot() []SegmentInfo {
	a.mu.Lock()
	segs := a.segmentsLocked()
	sym := a.symbolizerLocked()
	a.mu.Unlock()
	sym.blocks(segs)
	return segs
}

// segmentsLocked is Snapshot's description, with each block's history site.
func (a *Allocator) segmentsLocked() []SegmentInfo {
	var out []SegmentInfo
	for _, seg := range a.segments {
		var cur *SegmentInfo
		for b := range seg.blocks() {
			if !b.mapped {
				cur = nil
				continue
			}
			if cur == nil {
				out = append(out, SegmentInfo{Address: b.addr, Stream: seg.stream, Pool: seg.kind.String(), Expandable: seg.expandable})
				cur = &out[len(out)-1]
			}
			bi := BlockInfo{Address: b.addr, Size: b.size}
			switch {
			case b.allocated:
				bi.State = ActiveAllocated
				cur.AllocatedSize += b.size
			case b.eventCount > 0 || len(b.streamUses) > 0: // waiting for events, or for a capture's end
				bi.State = ActivePendingFree
			}
			if bi.State != Inactive {
				bi.Requested, bi.site = b.requested, b.site
				cur.ActiveSize += b.size
				cur.RequestedSize += b.requested
			}
			cur.TotalSize += b.size
			cur.Blocks = append(cur.Blocks, bi)
		}
	}
	slices.SortFunc(out, func(x, y SegmentInfo) int { return cmp.Compare(x.Address, y.Address) })
	return out
}
