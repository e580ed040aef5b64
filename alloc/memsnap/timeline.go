package memsnap

import (
	"cmp"
	"fmt"
	"path"
	"runtime"
	"slices"
	"strings"

	"github.com/subletml/sublet/alloc"
)

// Timeline is one device's memory after every event of its trace, worked out backwards
// from the snapshot's final segments (so the events the ring dropped do not matter) and
// forwards by allocation site.
type Timeline struct {
	// Points has one entry per trace event, the state after it.
	Points []Point
	// Sites label the allocation sites, largest peak first; Before (blocks allocated
	// before the first recorded event) is one of them when there were such blocks, and
	// the last may be "other" (the sites beyond the first MaxSites-1).
	Sites []string
	// OOMs are the indices of the oom events.
	OOMs []int
	// Requested says that the sizes are the callers' (a PyTorch snapshot, which has no
	// block_size), not the rounded block sizes.
	Requested bool
}

// Point is the memory after one event.
type Point struct {
	TimeUs                      int64
	Action                      string
	Allocated, Reserved, Active int64
	// BySite[i] is what Sites[i] holds allocated.
	BySite []int64
}

// MaxSites is how many sites a Timeline keeps apart; the rest are "other".
const MaxSites = 12

// Before is the site of blocks allocated before the trace's first event.
const Before = "(before the trace)"

// sizeOf is the size an event moves: the block size when recorded.
func (e *TraceEntry) sizeOf() int64 {
	if e.BlockSize > 0 {
		return e.BlockSize
	}
	return e.Size
}

// TimelineOf returns device dev's timeline. A trace inconsistent with the segments
// (memory going negative) is an error naming the event.
func TimelineOf(s *Snapshot, dev int) (*Timeline, error) {
	if n := max(len(s.DeviceTraces), len(s.Devices), 1); dev < 0 || dev >= n {
		return nil, fmt.Errorf("timeline: no device %d in the snapshot (it has devices 0 to %d)", dev, n-1)
	}
	var tr []TraceEntry
	if dev < len(s.DeviceTraces) {
		tr = s.DeviceTraces[dev]
	}
	tl := &Timeline{Requested: true}
	for _, e := range tr {
		if e.BlockSize > 0 {
			tl.Requested = false
			break
		}
	}
	var alloc, active, reserved int64
	for _, seg := range s.Segments {
		if seg.Device != dev {
			continue
		}
		reserved += seg.TotalSize
		for _, b := range seg.Blocks {
			size := b.Size
			if tl.Requested {
				size = b.RequestedSize
			}
			switch b.State {
			case "active_allocated":
				alloc += size
				active += size
			case "active_pending_free", "active_awaiting_free":
				active += size
			}
		}
	}
	tl.Points = make([]Point, len(tr))
	for i := len(tr) - 1; i >= 0; i-- {
		e := &tr[i]
		if alloc < 0 || active < 0 || reserved < 0 {
			return nil, fmt.Errorf("timeline: device_traces[%d][%d] (%s): memory before it would be negative; the trace does not lead to the snapshot's segments", dev, i+1, tr[i+1].Action)
		}
		tl.Points[i] = Point{TimeUs: e.TimeUs, Action: e.Action, Allocated: alloc, Reserved: reserved, Active: active}
		n := e.sizeOf()
		switch e.Action {
		case "alloc":
			alloc -= n
			active -= n
		case "free_requested":
			alloc += n
		case "free_completed":
			active += n
		case "segment_alloc", "segment_map":
			reserved -= e.Size
		case "segment_free", "segment_unmap":
			reserved += e.Size
		case "oom":
			tl.OOMs = append(tl.OOMs, i)
		}
	}
	if alloc < 0 || active < 0 || reserved < 0 {
		return nil, fmt.Errorf("timeline: device_traces[%d][0]: memory before it would be negative; the trace does not lead to the snapshot's segments", dev)
	}
	slices.Reverse(tl.OOMs)
	tl.bySite(tr, alloc)
	return tl, nil
}

// bySite splits each point's allocated bytes by site, initial bytes allocated before
// the trace.
func (tl *Timeline) bySite(tr []TraceEntry, initial int64) {
	type live struct {
		site int
		size int64
	}
	index := map[string]int{Before: 0}
	names := []string{Before}
	liveAt := map[uint64]live{}
	cur := []int64{initial}
	rows := make([][]int64, len(tr))
	for i := range tr {
		e := &tr[i]
		switch e.Action {
		case "alloc":
			l := SiteLabel(e.Frames, e.Op)
			id, ok := index[l]
			if !ok {
				id = len(names)
				index[l] = id
				names = append(names, l)
				cur = append(cur, 0)
			}
			cur[id] += e.sizeOf()
			liveAt[e.Addr] = live{id, e.sizeOf()}
		case "free_requested":
			if l, ok := liveAt[e.Addr]; ok {
				cur[l.site] -= l.size
				delete(liveAt, e.Addr)
			} else {
				cur[0] -= e.sizeOf()
			}
		}
		rows[i] = slices.Clone(cur)
	}
	// Keep the sites of the largest peaks; fold the rest into "other".
	peak := make([]int64, len(names))
	for _, r := range rows {
		for j, v := range r {
			peak[j] = max(peak[j], v)
		}
	}
	order := make([]int, 0, len(names))
	for j := range names {
		if peak[j] > 0 || j == 0 && initial > 0 {
			order = append(order, j)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(peak[b], peak[a]) })
	other := -1
	if len(order) > MaxSites {
		order, other = order[:MaxSites-1], MaxSites-1
	}
	slot := make([]int, len(names))
	for j := range slot {
		slot[j] = other
	}
	for k, j := range order {
		slot[j] = k
		tl.Sites = append(tl.Sites, names[j])
	}
	if other >= 0 {
		tl.Sites = append(tl.Sites, "other")
	}
	for i, r := range rows {
		by := make([]int64, len(tl.Sites))
		for j, v := range r {
			if slot[j] >= 0 {
				by[slot[j]] += v
			}
		}
		tl.Points[i].BySite = by
	}
}

// libraryPackages are sublet's own packages: a site is named by the first frame
// outside them, the user's code that asked for the memory. The sublet command (cmd)
// is among them: what it replays is a trace's memory, never its own.
var libraryPackages = []string{"alloc", "tensor", "autograd", "nn", "optim", "amp", "checkpoint", "kernels", "device", "dtype", "cmd"}

// SiteLabel names an allocation site: the op, if any, and the first frame outside
// sublet's library packages and the Go runtime, as "func (file.go:line)".
func SiteLabel(frames []alloc.Frame, op string) string {
	var at string
	for _, f := range frames {
		if isLibrary(f) {
			continue
		}
		at = fmt.Sprintf("%s (%s:%d)", shortFunc(f.Name), path.Base(f.Filename), f.Line)
		break
	}
	switch {
	case op != "" && at != "":
		return op + " @ " + at
	case op != "":
		return op
	case at != "":
		return at
	}
	return "(no stack)"
}

// moduleRoot is the folder of sublet's sources in this build, read from this file's
// own path (it is alloc/memsnap/timeline.go): a closure of a library package inlined
// into the caller's function carries the caller's name but the library's file.
var moduleRoot = func() string {
	_, file, _, _ := runtime.Caller(0)
	return path.Dir(path.Dir(path.Dir(file)))
}()

func isLibrary(f alloc.Frame) bool {
	if strings.HasPrefix(f.Name, "runtime.") || strings.HasPrefix(f.Name, "testing.") {
		return true
	}
	if rest, ok := strings.CutPrefix(f.Filename, moduleRoot+"/"); ok && moduleRoot != "." {
		top, _, _ := strings.Cut(rest, "/")
		return slices.Contains(libraryPackages, top)
	}
	if rest, ok := strings.CutPrefix(f.Name, "github.com/subletml/sublet/"); ok {
		pkg, _, _ := strings.Cut(rest, ".")
		top, _, _ := strings.Cut(pkg, "/")
		return slices.Contains(libraryPackages, top)
	}
	return false
}

// shortFunc drops the import path of a function name: "pkg.Func".
func shortFunc(fn string) string {
	if i := strings.LastIndexByte(fn, '/'); i >= 0 {
		return fn[i+1:]
	}
	return fn
}
