package memsnap

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/subletml/sublet/alloc"
)

// The writers share one value tree: dict (ordered keys), []any, tuple, string, int64,
// uint64, float64, bool, nil and frames. The readers produce the same kinds but with
// map[string]any for dictionaries and []any for tuples.

type dict []item

type item struct {
	k string
	v any
}

// tuple is a Python tuple (segment_pool_id); JSON writes it as a list.
type tuple []any

// frames is a stack, kept whole so that the pickle writer can share repeated ones.
type frames []alloc.Frame

func (s *Snapshot) tree() dict {
	segs := make([]any, len(s.Segments))
	for i, seg := range s.Segments {
		blocks := make([]any, len(seg.Blocks))
		for j, b := range seg.Blocks {
			d := dict{{"address", b.Address}, {"size", b.Size}, {"requested_size", b.RequestedSize}, {"state", b.State}, {"frames", frames(b.Frames)}}
			blocks[j] = tagged(d, b.Op, b.Scope)
		}
		segs[i] = dict{{"device", int64(seg.Device)}, {"address", seg.Address}, {"total_size", seg.TotalSize},
			{"allocated_size", seg.AllocatedSize}, {"active_size", seg.ActiveSize}, {"requested_size", seg.RequestedSize},
			{"stream", seg.Stream}, {"segment_type", seg.SegmentType}, {"segment_pool_id", tuple{int64(0), int64(0)}},
			{"is_expandable", seg.IsExpandable}, {"frames", frames(nil)}, {"blocks", blocks}}
	}
	traces := make([]any, len(s.DeviceTraces))
	for i, tr := range s.DeviceTraces {
		l := make([]any, len(tr))
		for j, e := range tr {
			d := dict{{"action", e.Action}}
			if e.Action == "oom" {
				d = append(d, item{"device_free", e.DeviceFree})
			} else {
				d = append(d, item{"addr", e.Addr})
			}
			d = append(d, item{"size", e.Size}, item{"stream", e.Stream}, item{"time_us", e.TimeUs}, item{"frames", frames(e.Frames)})
			if e.BlockSize != 0 {
				d = append(d, item{"block_size", e.BlockSize})
			}
			l[j] = tagged(d, e.Op, e.Scope)
		}
		traces[i] = l
	}
	out := dict{{"segments", segs}, {"device_traces", traces}}
	if st := s.Settings; st != nil {
		div := dict{}
		for i, v := range st.RoundupPower2Divisions {
			div = append(div, item{strconv.Itoa(1 << i), v})
		}
		out = append(out, item{"allocator_settings", dict{{"max_split_size", st.MaxSplitSize},
			{"garbage_collection_threshold", st.GarbageCollectionThreshold}, {"expandable_segments", st.ExpandableSegments},
			{"roundup_power2_divisions", div}}})
	}
	out = append(out, item{"external_annotations", []any{}})
	if len(s.Devices) > 0 {
		devs := make([]any, len(s.Devices))
		for i, d := range s.Devices {
			stats := dict{}
			for _, k := range slices.Sorted(maps.Keys(d.Stats)) {
				stats = append(stats, item{k, d.Stats[k]})
			}
			devs[i] = dict{{"name", d.Name}, {"device_free", d.DeviceFree}, {"device_total", d.DeviceTotal},
				{"dropped", d.Dropped}, {"stats", stats}}
		}
		out = append(out, item{"sublet", dict{{"devices", devs}}})
	}
	return out
}

// tagged adds the op and scope keys that are set.
func tagged(d dict, op, scope string) dict {
	if op != "" {
		d = append(d, item{"op", op})
	}
	if scope != "" {
		d = append(d, item{"scope", scope})
	}
	return d
}

// FieldError is a snapshot whose value at Path is missing or of the wrong kind.
type FieldError struct {
	// Path is the key path, e.g. segments[3].blocks[0].state.
	Path string
	Msg  string
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Msg }

// reader walks a decoded tree, remembering the path for errors.
type reader struct{ err error }

func (r *reader) fail(path, format string, args ...any) {
	if r.err == nil {
		r.err = &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)}
	}
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "None"
	case map[string]any:
		return "a dict"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a bool"
	case int64, uint64:
		return "an int"
	case float64:
		return "a float"
	}
	return fmt.Sprintf("%T", v)
}

func (r *reader) dict(v any, path string) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		r.fail(path, "want a dict, got %s", kind(v))
	}
	return m
}

func (r *reader) list(v any, path string) []any {
	l, ok := v.([]any)
	if !ok && v != nil {
		r.fail(path, "want a list, got %s", kind(v))
	}
	return l
}

// field returns m[key]; a missing key is an error unless optional.
func (r *reader) field(m map[string]any, path, key string, optional bool) (any, string) {
	p := joinKey(path, key)
	v, ok := m[key]
	if !ok && !optional && m != nil {
		r.fail(p, "missing")
	}
	return v, p
}

// integer returns the int at key (an int64 or uint64; 0 for an optional missing one or
// None; Python's bool counts as an int).
func (r *reader) integer(m map[string]any, path, key string, optional bool) (any, string) {
	v, p := r.field(m, path, key, optional)
	switch x := v.(type) {
	case int64, uint64:
		return x, p
	case bool:
		if x {
			return int64(1), p
		}
		return int64(0), p
	case nil:
		if !optional {
			r.fail(p, "want an int, got None")
		}
		return int64(0), p
	}
	r.fail(p, "want an int, got %s", kind(v))
	return int64(0), p
}

func (r *reader) int(m map[string]any, path, key string, optional bool) int64 {
	v, p := r.integer(m, path, key, optional)
	if u, ok := v.(uint64); ok {
		if u > math.MaxInt64 {
			r.fail(p, "%d is out of range", u)
		}
		return int64(u)
	}
	return v.(int64)
}

func (r *reader) uint(m map[string]any, path, key string, optional bool) uint64 {
	v, p := r.integer(m, path, key, optional)
	if i, ok := v.(int64); ok {
		if i < 0 {
			r.fail(p, "want an address, got %d", i)
		}
		return uint64(i)
	}
	return v.(uint64)
}

func (r *reader) str(m map[string]any, path, key string, optional bool) string {
	v, p := r.field(m, path, key, optional)
	if v == nil && optional {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		r.fail(p, "want a string, got %s", kind(v))
	}
	return s
}

func (r *reader) bool(m map[string]any, path, key string) bool {
	v, p := r.field(m, path, key, true)
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	}
	r.fail(p, "want a bool, got %s", kind(v))
	return false
}

func (r *reader) float(m map[string]any, path, key string) float64 {
	v, p := r.field(m, path, key, true)
	switch x := v.(type) {
	case nil:
		return 0
	case float64:
		return x
	case int64:
		return float64(x)
	}
	r.fail(p, "want a float, got %s", kind(v))
	return 0
}

func (r *reader) frames(m map[string]any, path string) []alloc.Frame {
	v, p := r.field(m, path, "frames", true)
	l := r.list(v, p)
	var out []alloc.Frame
	for i, f := range l {
		fp := fmt.Sprintf("%s[%d]", p, i)
		fm := r.dict(f, fp)
		out = append(out, alloc.Frame{Name: r.str(fm, fp, "name", false), Filename: r.str(fm, fp, "filename", false),
			Line: int(r.int(fm, fp, "line", false))})
	}
	return out
}

var blockStates = []string{"active_allocated", "active_pending_free", "active_awaiting_free", "inactive"}

// fromTree reads a decoded snapshot. A bare list is a list of segments (PyTorch's
// memory_snapshot()), as _memory_viz accepts.
func fromTree(v any) (*Snapshot, error) {
	var r reader
	if l, ok := v.([]any); ok {
		v = map[string]any{"segments": l}
	}
	top := r.dict(v, "snapshot")
	if r.err != nil {
		return nil, r.err
	}
	s := &Snapshot{}
	segs, sp := r.field(top, "", "segments", false)
	for i, sv := range r.list(segs, sp) {
		p := fmt.Sprintf("segments[%d]", i)
		m := r.dict(sv, p)
		seg := Segment{Device: int(r.int(m, p, "device", true)), Address: r.uint(m, p, "address", false),
			TotalSize: r.int(m, p, "total_size", false), AllocatedSize: r.int(m, p, "allocated_size", true),
			ActiveSize: r.int(m, p, "active_size", true), RequestedSize: r.int(m, p, "requested_size", true),
			Stream: r.int(m, p, "stream", true), SegmentType: r.str(m, p, "segment_type", true), IsExpandable: r.bool(m, p, "is_expandable")}
		bl, bp := r.field(m, p, "blocks", false)
		var sum int64
		for j, bv := range r.list(bl, bp) {
			q := fmt.Sprintf("%s[%d]", bp, j)
			bm := r.dict(bv, q)
			b := Block{Size: r.int(bm, q, "size", false), RequestedSize: r.int(bm, q, "requested_size", true),
				State: r.str(bm, q, "state", false), Frames: r.frames(bm, q), Op: r.str(bm, q, "op", true), Scope: r.str(bm, q, "scope", true)}
			b.Address = seg.Address + uint64(sum)
			if _, ok := bm["address"]; ok {
				b.Address = r.uint(bm, q, "address", false)
			}
			if r.err == nil && !slices.Contains(blockStates, b.State) {
				r.fail(q+".state", "unknown state %q (want one of %v)", b.State, blockStates)
			}
			if r.err == nil && b.Size < 0 {
				r.fail(q+".size", "negative size %d", b.Size)
			}
			sum += b.Size
			seg.Blocks = append(seg.Blocks, b)
		}
		if r.err == nil && len(seg.Blocks) > 0 && sum != seg.TotalSize {
			r.fail(p+".blocks", "the blocks' sizes add up to %d, not the segment's total_size %d", sum, seg.TotalSize)
		}
		if r.err != nil {
			return nil, r.err
		}
		s.Segments = append(s.Segments, seg)
	}
	tv, tp := r.field(top, "", "device_traces", true)
	for d, lv := range r.list(tv, tp) {
		dp := fmt.Sprintf("device_traces[%d]", d)
		var tr []TraceEntry
		for i, ev := range r.list(lv, dp) {
			p := fmt.Sprintf("%s[%d]", dp, i)
			m := r.dict(ev, p)
			e := TraceEntry{Action: r.str(m, p, "action", false), Size: r.int(m, p, "size", true), BlockSize: r.int(m, p, "block_size", true),
				Stream: r.int(m, p, "stream", true), TimeUs: r.int(m, p, "time_us", true), Frames: r.frames(m, p),
				Op: r.str(m, p, "op", true), Scope: r.str(m, p, "scope", true)}
			if e.Action == "oom" {
				e.DeviceFree = r.int(m, p, "device_free", true)
			} else {
				e.Addr = r.uint(m, p, "addr", true)
			}
			if r.err == nil {
				if _, ok := alloc.ParseAction(e.Action); !ok && e.Action != "annotate" {
					r.fail(p+".action", "unknown action %q", e.Action)
				}
			}
			if r.err != nil {
				return nil, r.err
			}
			tr = append(tr, e)
		}
		s.DeviceTraces = append(s.DeviceTraces, tr)
	}
	if av, ap := r.field(top, "", "allocator_settings", true); av != nil {
		m := r.dict(av, ap)
		st := Settings{MaxSplitSize: r.int(m, ap, "max_split_size", true), GarbageCollectionThreshold: r.float(m, ap, "garbage_collection_threshold"),
			ExpandableSegments: r.bool(m, ap, "expandable_segments")}
		if dv, dp := r.field(m, ap, "roundup_power2_divisions", true); dv != nil {
			dm := r.dict(dv, dp)
			for i := 0; r.err == nil; i++ {
				k := strconv.Itoa(1 << i)
				if _, ok := dm[k]; !ok {
					break
				}
				st.RoundupPower2Divisions = append(st.RoundupPower2Divisions, r.int(dm, dp, k, false))
			}
		}
		s.Settings = &st
	}
	if sv, sp := r.field(top, "", "sublet", true); sv != nil {
		m := r.dict(sv, sp)
		dv, dp := r.field(m, sp, "devices", false)
		for i, v := range r.list(dv, dp) {
			p := fmt.Sprintf("%s[%d]", dp, i)
			dm := r.dict(v, p)
			d := Device{Name: r.str(dm, p, "name", false), DeviceFree: r.int(dm, p, "device_free", true),
				DeviceTotal: r.int(dm, p, "device_total", true), Dropped: r.int(dm, p, "dropped", true), Stats: map[string]int64{}}
			stv, stp := r.field(dm, p, "stats", true)
			if stv != nil {
				sm := r.dict(stv, stp)
				for k := range sm {
					d.Stats[k] = r.int(sm, stp, k, false)
				}
			}
			s.Devices = append(s.Devices, d)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return s, nil
}
