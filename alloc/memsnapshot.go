package alloc

import (
	"runtime"
	"slices"
)

// Frame is one call of a recorded stack, PyTorch's snapshot frame.
type Frame struct {
	// Name is the function, package-qualified (runtime.Frame.Function).
	Name     string `json:"name"`
	Filename string `json:"filename"`
	Line     int    `json:"line"`
}

// TraceEntry is one history event with the stack of the call that caused it.
type TraceEntry struct {
	HistoryEvent
	// Frames start at the caller of the allocator's method; empty when that call
	// captured none (history was turned on during it, or it was a deferred free).
	Frames []Frame
}

// MemorySnapshot is the allocator's state and history at one moment
// (torch.cuda.memory._snapshot()); package alloc/memsnap writes it in PyTorch's formats.
type MemorySnapshot struct {
	// Device is the device's name.
	Device string
	// Segments are Snapshot()'s, each active block with its allocation stack.
	Segments []SegmentInfo
	// Trace is the ring of events, oldest first; empty unless HistoryOptions.Trace.
	Trace []TraceEntry
	// Dropped counts the events recorded but pushed out of the ring by newer ones.
	Dropped int64
	// Recording says whether history was on when the snapshot was taken.
	Recording bool
	// Config is the configuration in force.
	Config Config
	// DeviceFree and DeviceTotal are the device's memory at the snapshot; 0 when it
	// could not report them.
	DeviceFree, DeviceTotal int64
	// Stats are the statistics at the snapshot.
	Stats Stats
}

// MemorySnapshot returns the segments with their blocks, the stacks that allocated the
// live ones and the events in the history's ring. With history recording, it records a
// snapshot event first, as PyTorch does, so that the trace shows when it was taken.
func (a *Allocator) MemorySnapshot() *MemorySnapshot {
	free, total, err := a.dev.MemInfo()
	if err != nil {
		free, total = 0, 0
	}
	a.mu.Lock()
	if h := a.recording(); h != nil {
		h.begin(nil)
		a.recordCall(ActionSnapshot, 0, 0, 0)
	}
	s := &MemorySnapshot{Device: a.dev.Name(), Segments: a.segmentsLocked(), Config: a.cfg,
		DeviceFree: free, DeviceTotal: total, Stats: a.stats}
	var recs []traceRec
	if h := a.hist; h != nil {
		recs = slices.Clone(h.ordered())
		s.Dropped = h.dropped
		s.Recording = h.on()
	}
	sym := a.symbolizerLocked()
	a.mu.Unlock()
	sym.blocks(s.Segments)
	s.Trace = make([]TraceEntry, len(recs))
	for i, r := range recs {
		s.Trace[i] = TraceEntry{HistoryEvent: r.HistoryEvent, Frames: sym.frames(r.site)}
	}
	return s
}

// SiteStats is what one allocation site (a stack and a tag) holds and has allocated
// since history started recording.
type SiteStats struct {
	// PCs are the return addresses of the stack, innermost first (runtime.Callers').
	PCs    []uintptr
	Frames []Frame
	Tag    Tag
	// LiveBlocks and LiveBytes count the site's allocated blocks and their sizes;
	// LiveRequested sums what the callers asked for.
	LiveBlocks, LiveBytes, LiveRequested int64
	// Allocs and AllocBytes count every allocation the site made and their block sizes.
	Allocs, AllocBytes int64
}

// HistorySites returns every site the history recorded that allocated, in the order
// first seen; nil when history was never on. Blocks allocated while history was off belong
// to no site and are not counted.
func (a *Allocator) HistorySites() []SiteStats {
	a.mu.Lock()
	h := a.hist
	if h == nil {
		a.mu.Unlock()
		return nil
	}
	out := make([]SiteStats, len(h.sites)-1)
	for i, st := range h.sites[1:] {
		out[i] = SiteStats{Tag: st.key.tag, Allocs: st.allocs, AllocBytes: st.allocSize}
	}
	for _, seg := range a.segments {
		for b := range seg.blocks() {
			if b.allocated && b.site > 0 {
				o := &out[b.site-1]
				o.LiveBlocks++
				o.LiveBytes += b.size
				o.LiveRequested += b.requested
			}
		}
	}
	sym := a.symbolizerLocked()
	a.mu.Unlock()
	kept := out[:0]
	for i, st := range out {
		if st.Allocs > 0 {
			st.PCs, st.Frames = sym.pcs(int32(i+1)), sym.frames(int32(i+1))
			kept = append(kept, st)
		}
	}
	return kept
}

// symbolizer turns the history's sites into frames after the lock is released, each
// site once.
type symbolizer struct {
	keys []siteKey
	memo map[int32][]Frame
}

// symbolizerLocked copies the sites' stacks (under mu).
func (a *Allocator) symbolizerLocked() *symbolizer {
	sym := &symbolizer{memo: make(map[int32][]Frame)}
	if a.hist != nil {
		sym.keys = make([]siteKey, len(a.hist.sites))
		for i, s := range a.hist.sites {
			sym.keys[i] = s.key
		}
	}
	return sym
}

// blocks fills the frames and tag of every block that has a site.
func (sym *symbolizer) blocks(segs []SegmentInfo) {
	for i := range segs {
		for j := range segs[i].Blocks {
			b := &segs[i].Blocks[j]
			if b.site > 0 {
				b.Frames, b.Tag = sym.frames(b.site), sym.keys[b.site].tag
			}
			b.site = 0
		}
	}
}

// pcs returns the return addresses of site s.
func (sym *symbolizer) pcs(s int32) []uintptr {
	pcs := sym.keys[s].pcs[:]
	n := 0
	for n < len(pcs) && pcs[n] != 0 {
		n++
	}
	return slices.Clone(pcs[:n])
}

// frames returns site s's stack symbolised, nil for site 0; runtime.goexit, which ends
// every goroutine's stack, is left out.
func (sym *symbolizer) frames(s int32) []Frame {
	if s <= 0 || int(s) >= len(sym.keys) {
		return nil
	}
	if f, ok := sym.memo[s]; ok {
		return f
	}
	var out []Frame
	fs := runtime.CallersFrames(sym.pcs(s))
	for {
		f, more := fs.Next()
		if f.Function != "runtime.goexit" && f.Function != "" {
			out = append(out, Frame{Name: f.Function, Filename: f.File, Line: f.Line})
		}
		if !more {
			break
		}
	}
	sym.memo[s] = out
	return out
}
