// Package memsnap writes and reads memory snapshots in PyTorch's format: the dictionary
// torch.cuda.memory._snapshot() returns, as JSON or as the pickle that
// `python -m torch.cuda._memory_viz trace_plot|segment_plot|stats FILE` and
// pytorch.org/memory_viz read.
//
// Use: turn history on (alloc.Allocator.RecordHistory), run the workload, then
//
//	s := memsnap.From(a.MemorySnapshot())
//	err := memsnap.WriteFile("snap.pickle", s) // or snap.json
//
// and read one back (sublet's or PyTorch's own pickles) with ReadFile.
//
// Invariants of a Snapshot this package returns:
//   - Segment and block fields carry PyTorch's key names and meanings: a segment's blocks
//     tile it in address order, a block's state is "active_allocated",
//     "active_pending_free" or "inactive", requested_size is 0 for an inactive block.
//   - DeviceTraces[d] are device d's events oldest first, with PyTorch's action names
//     (alloc, free_requested, free_completed, segment_alloc, segment_free, segment_map,
//     segment_unmap, oom, snapshot) and sublet's empty_cache; an oom has device_free and
//     no addr. Sizes are PyTorch's: the caller's size for alloc and free events.
//   - Keys PyTorch does not have are sublet's additions, which PyTorch's tools ignore:
//     block_size, op and scope on events, op and scope on blocks, and the top-level
//     "sublet" entry (device names, memory, statistics, dropped events).
//   - A reader error names the file, and the key path or pickle offset, of what is wrong.
package memsnap

import (
	"slices"

	"github.com/subletml/sublet/alloc"
)

// Snapshot is torch.cuda.memory._snapshot()'s dictionary.
type Snapshot struct {
	Segments []Segment
	// DeviceTraces has one list of events per device index.
	DeviceTraces [][]TraceEntry
	// Settings are allocator_settings: the settings of device 0's allocator (one
	// allocator's, as in PyTorch); nil when the file had none.
	Settings *Settings
	// Devices are sublet's description of each device index; empty for a PyTorch
	// snapshot.
	Devices []Device
}

// Segment is one segment (PyTorch's "segments" entry).
type Segment struct {
	Device                                   int
	Address                                  uint64
	TotalSize                                int64
	AllocatedSize, ActiveSize, RequestedSize int64
	Stream                                   int64
	// SegmentType is "small" or "large".
	SegmentType  string
	IsExpandable bool
	Blocks       []Block
}

// Block is one block of a segment.
type Block struct {
	Address       uint64
	Size          int64
	RequestedSize int64
	// State is "active_allocated", "active_pending_free" or "inactive".
	State  string
	Frames []alloc.Frame
	// Op and Scope are the allocation's tag (sublet's).
	Op, Scope string
}

// TraceEntry is one event of a device trace.
type TraceEntry struct {
	Action string
	// Addr is absent (0) for oom.
	Addr uint64
	Size int64
	// BlockSize is the rounded size of alloc and free events (sublet's; 0 in PyTorch's
	// snapshots, where readers fall back to Size).
	BlockSize int64
	Stream    int64
	// DeviceFree is set for oom only.
	DeviceFree int64
	TimeUs     int64
	Frames     []alloc.Frame
	Op, Scope  string
}

// Settings are PyTorch's allocator_settings of one allocator.
type Settings struct {
	MaxSplitSize               int64
	GarbageCollectionThreshold float64
	ExpandableSegments         bool
	// RoundupPower2Divisions[i] governs [2^i MiB, 2^(i+1) MiB); PyTorch keys them by
	// the interval's MiB ("1", "2", "4", ...).
	RoundupPower2Divisions []int64
}

// Device is sublet's description of one device index.
type Device struct {
	Name                    string
	DeviceFree, DeviceTotal int64
	// Dropped counts events pushed out of the history's ring.
	Dropped int64
	// Stats are the allocator's statistics under PyTorch's memory_stats() keys.
	Stats map[string]int64
}

// From converts the allocators' snapshots into one, device index i for snaps[i].
func From(snaps ...*alloc.MemorySnapshot) *Snapshot {
	s := &Snapshot{DeviceTraces: make([][]TraceEntry, len(snaps))}
	for i, m := range snaps {
		for _, seg := range m.Segments {
			s.Segments = append(s.Segments, segmentOf(i, seg))
		}
		tr := make([]TraceEntry, 0, len(m.Trace))
		for _, e := range m.Trace {
			tr = append(tr, TraceEntry{Action: e.Action.String(), Addr: uint64(e.Addr), Size: e.Size, BlockSize: e.BlockSize,
				Stream: int64(e.Stream), DeviceFree: e.DeviceFree, TimeUs: e.TimeUs, Frames: e.Frames, Op: e.Tag.Op, Scope: e.Tag.Scope})
		}
		s.DeviceTraces[i] = tr
		div := make([]int64, len(m.Config.RoundupPower2Divisions))
		for j, d := range m.Config.RoundupPower2Divisions {
			div[j] = int64(d)
		}
		maxSplit := m.Config.MaxSplitSize
		if maxSplit == 0 {
			maxSplit = -1 // PyTorch's SIZE_MAX read as a signed int64
		}
		if i == 0 {
			s.Settings = &Settings{MaxSplitSize: maxSplit, GarbageCollectionThreshold: m.Config.GarbageCollectionThreshold,
				ExpandableSegments: m.Config.ExpandableSegments, RoundupPower2Divisions: div}
		}
		s.Devices = append(s.Devices, Device{Name: m.Device, DeviceFree: m.DeviceFree, DeviceTotal: m.DeviceTotal,
			Dropped: m.Dropped, Stats: m.Stats.Map()})
	}
	return s
}

func segmentOf(dev int, seg alloc.SegmentInfo) Segment {
	out := Segment{Device: dev, Address: uint64(seg.Address), TotalSize: seg.TotalSize, AllocatedSize: seg.AllocatedSize,
		ActiveSize: seg.ActiveSize, RequestedSize: seg.RequestedSize, Stream: int64(seg.Stream), SegmentType: seg.Pool,
		IsExpandable: seg.Expandable, Blocks: make([]Block, len(seg.Blocks))}
	for j, b := range seg.Blocks {
		out.Blocks[j] = Block{Address: uint64(b.Address), Size: b.Size, RequestedSize: b.Requested, State: b.State.String(),
			Frames: slices.Clip(b.Frames), Op: b.Tag.Op, Scope: b.Tag.Scope}
	}
	return out
}
