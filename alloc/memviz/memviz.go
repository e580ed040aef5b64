// Package memviz renders a memory snapshot (package memsnap: sublet's or PyTorch's) as
// one self-contained HTML page: no network, no external script or style. For each
// device it draws allocated memory over time stacked by allocation site with reserved
// and active memory as lines, the OOM moments marked; the segment map with every block
// coloured by state; and the largest live allocations with their stacks.
//
//	s, err := memsnap.ReadFile("snap.pickle")
//	err = memviz.WriteHTML(os.Stdout, s, memviz.Options{})
//
// The page's elements carry stable ids and classes (#device-N, .timeline, .oom-marker,
// .segment, .block, #largest-N, #ooms-N) that its browser test checks.
package memviz

import (
	"bytes"
	"cmp"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"

	"github.com/subletml/sublet/alloc/memsnap"
)

//go:embed page.html
var pageSource string

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"bytes":     FormatBytes,
	"add":       func(a, b int) int { return a + b },
	"add2":      func(a, b float64) float64 { return a + b },
	"int":       func(n int64) int { return int(n) },
	"segY":      func(i int) int { return i * segRowH },
	"segHeight": func(rows []segmentRow) int { return max(1, len(rows)) * segRowH },
}).Parse(pageSource))

// segRowH is the height of one segment's row in the segment map.
const segRowH = 34

// Options shape the page.
type Options struct {
	// Title heads the page; "" means "sublet memory snapshot".
	Title string
	// Progress, when not nil, is called with the number of devices rendered so far.
	Progress func(done, total int)
}

// WriteHTML writes the page of s.
func WriteHTML(w io.Writer, s *memsnap.Snapshot, o Options) error {
	if o.Title == "" {
		o.Title = "sublet memory snapshot"
	}
	n := max(len(s.DeviceTraces), len(s.Devices))
	for _, seg := range s.Segments {
		n = max(n, seg.Device+1)
	}
	data := pageData{Title: o.Title}
	for d := range n {
		dv, err := deviceOf(s, d)
		if err != nil {
			return err
		}
		data.Devices = append(data.Devices, dv)
		if o.Progress != nil {
			o.Progress(d+1, n)
		}
	}
	var buf bytes.Buffer
	if err := page.Execute(&buf, data); err != nil {
		return fmt.Errorf("memviz: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

type pageData struct {
	Title   string
	Devices []deviceData
}

type deviceData struct {
	Index                                    int
	Name                                     string
	Events, Dropped                          int64
	Allocated, Reserved, Active, Total, Free int64
	Requested                                bool
	// PeakAllocated is the most allocated at any event of the trace, at PeakEvent.
	PeakAllocated int64
	PeakEvent     int
	// Blocks counts the blocks of the snapshot's segments, Free those of them free.
	Blocks, FreeBlocks int
	Timeline           *chart
	Segments           []segmentRow
	Largest            []largeRow
	OOMs               []oomRow
	// MoreOOMs counts the OOMs beyond the rows shown.
	MoreOOMs int
	// Data is the sampled series for the page's cursor readout.
	Data template.JS
}

// Geometry of the timeline chart, in SVG user units.
const (
	chartW, chartH = 1000.0, 320.0
	padL, padT     = 80.0, 12.0
	padB           = 40.0 // room for the event axis
	maxColumns     = 1500
	segBarW        = 860.0
	maxSegments    = 300
	maxLargest     = 20
	maxOOMRows     = 50
)

// palette colours the sites, in order (the last is for "other").
var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
	"#ff9da7", "#9c755f", "#bab0ac", "#86bcb6", "#8cd17d"}

type chart struct {
	W, H, PadL, PadB float64
	Areas            []area
	Reserved, Active string
	Ticks            []tick
	// XTicks mark event numbers along the axis at height XAxisY.
	XTicks []xtick
	XAxisY float64
	OOMX   []float64
}

type xtick struct {
	X     float64
	Label string
}

type area struct {
	Site, Colour, Path string
	Peak               int64
}

type tick struct {
	Y     float64
	Label string
}

type segmentRow struct {
	Label  string
	Width  float64
	Blocks []blockRect
}

type blockRect struct {
	X, W  float64
	Class string
	Title string
}

type largeRow struct {
	Size, Requested int64
	Segment         string
	Site            string
	Stack           []string
}

type oomRow struct {
	Index               int
	Size, DeviceFree    int64
	Allocated, Reserved int64
	Site                string
}

func deviceOf(s *memsnap.Snapshot, d int) (deviceData, error) {
	dv := deviceData{Index: d, Name: fmt.Sprintf("device %d", d)}
	if d < len(s.Devices) {
		dev := s.Devices[d]
		dv.Name, dv.Total, dv.Free, dv.Dropped = dev.Name, dev.DeviceTotal, dev.DeviceFree, dev.Dropped
	}
	tl, err := memsnap.TimelineOf(s, d)
	if err != nil {
		return dv, err
	}
	dv.Requested = tl.Requested
	dv.Events = int64(len(tl.Points))
	var tr []memsnap.TraceEntry
	if d < len(s.DeviceTraces) {
		tr = s.DeviceTraces[d]
	}
	for _, seg := range s.Segments {
		if seg.Device != d {
			continue
		}
		dv.Reserved += seg.TotalSize
		for _, b := range seg.Blocks {
			dv.Blocks++
			switch b.State {
			case "active_allocated":
				dv.Allocated += b.Size
				dv.Active += b.Size
			case "inactive":
				dv.FreeBlocks++
			default:
				dv.Active += b.Size
			}
		}
	}
	if len(tl.Points) > 0 {
		dv.Timeline = timeline(tl)
		dv.Data = series(tl)
	}
	for i, p := range tl.Points {
		if p.Allocated > dv.PeakAllocated {
			dv.PeakAllocated, dv.PeakEvent = p.Allocated, i
		}
	}
	dv.MoreOOMs = max(0, len(tl.OOMs)-maxOOMRows)
	dv.Segments = segments(s, d)
	dv.Largest = largest(s, d)
	for _, i := range tl.OOMs[:min(len(tl.OOMs), maxOOMRows)] {
		p := tl.Points[i]
		e := tr[i]
		dv.OOMs = append(dv.OOMs, oomRow{Index: i, Size: e.Size, DeviceFree: e.DeviceFree, Allocated: p.Allocated,
			Reserved: p.Reserved, Site: memsnap.SiteLabel(e.Frames, e.Op)})
	}
	return dv, nil
}

// column is one drawn column of the timeline: the point at which the allocated areas are
// drawn, the span's highest allocation, and the span's highest reserved and active bytes
// for the lines, so that every peak survives however many events a column covers.
type column struct {
	// lo and hi bound the span of points, hi excluded.
	lo, hi, at       int
	reserved, active int64
}

// columns are the timeline's columns: one per point, or maxColumns evenly spread.
func columns(tl *memsnap.Timeline) []column {
	n := len(tl.Points)
	cols := min(n, maxColumns)
	out := make([]column, 0, cols)
	for c := range cols {
		lo, hi := c*n/cols, (c+1)*n/cols
		col := column{lo: lo, hi: hi, at: lo}
		for i := lo; i < hi; i++ {
			p := tl.Points[i]
			if p.Allocated > tl.Points[col.at].Allocated {
				col.at = i
			}
			col.reserved, col.active = max(col.reserved, p.Reserved), max(col.active, p.Active)
		}
		out = append(out, col)
	}
	return out
}

func timeline(tl *memsnap.Timeline) *chart {
	c := &chart{W: chartW, H: chartH, PadL: padL, PadB: padB}
	cols := columns(tl)
	var top int64 = 1
	for _, col := range cols {
		top = max(top, col.reserved, col.active, tl.Points[col.at].Allocated)
	}
	n := len(tl.Points)
	x := func(i int) float64 { return padL + (chartW-padL)*float64(i)/float64(max(n-1, 1)) }
	y := func(v int64) float64 { return padT + (chartH-padT-padB)*(1-float64(v)/float64(top)) }
	for k, site := range tl.Sites {
		var b strings.Builder
		var peak int64
		// Upper edge left to right (the cumulative sum through this site), lower edge
		// back.
		for j, col := range cols {
			var sum int64
			for _, v := range tl.Points[col.at].BySite[:k+1] {
				sum += v
			}
			peak = max(peak, tl.Points[col.at].BySite[k])
			fmt.Fprintf(&b, "%s%.1f,%.1f ", map[bool]string{true: "M", false: "L"}[j == 0], x(col.at), y(sum))
		}
		for j := len(cols) - 1; j >= 0; j-- {
			i := cols[j].at
			var sum int64
			for _, v := range tl.Points[i].BySite[:k] {
				sum += v
			}
			fmt.Fprintf(&b, "L%.1f,%.1f ", x(i), y(sum))
		}
		b.WriteString("Z")
		c.Areas = append(c.Areas, area{Site: site, Colour: palette[k%len(palette)], Path: b.String(), Peak: peak})
	}
	line := func(get func(col column) int64) string {
		var b strings.Builder
		for j, col := range cols {
			fmt.Fprintf(&b, "%s%.1f,%.1f ", map[bool]string{true: "M", false: "L"}[j == 0], x(col.at), y(get(col)))
		}
		return b.String()
	}
	c.Reserved = line(func(col column) int64 { return col.reserved })
	c.Active = line(func(col column) int64 { return col.active })
	for k := 0; k <= 4; k++ {
		v := top * int64(k) / 4
		c.Ticks = append(c.Ticks, tick{Y: y(v), Label: FormatBytes(v)})
	}
	c.XAxisY = chartH - padB
	step := tickStep(n - 1)
	for e := 0; e < n; e += step {
		c.XTicks = append(c.XTicks, xtick{X: x(e), Label: fmt.Sprint(e)})
	}
	for _, i := range tl.OOMs {
		c.OOMX = append(c.OOMX, x(i))
	}
	return c
}

// tickStep is the distance between event ticks for events 0 to last: 1, 2 or 5 times a
// power of ten, at most 10 ticks.
func tickStep(last int) int {
	for p := 1; ; p *= 10 {
		for _, m := range []int{1, 2, 5} {
			if last/(m*p) < 10 {
				return m * p
			}
		}
	}
}

// series is the JSON of the drawn columns for the cursor readout: i the event drawn, a
// its action, m the column's allocated (at i), reserved and active bytes, and s the
// first and last event of a column that covers several.
func series(tl *memsnap.Timeline) template.JS {
	type pt struct {
		I int      `json:"i"`
		A string   `json:"a"`
		M [3]int64 `json:"m"`
		S []int    `json:"s,omitempty"`
	}
	var pts []pt
	for _, col := range columns(tl) {
		p := tl.Points[col.at]
		q := pt{I: col.at, A: p.Action, M: [3]int64{p.Allocated, col.reserved, col.active}}
		if col.hi-col.lo > 1 {
			q.S = []int{col.lo, col.hi - 1}
		}
		pts = append(pts, q)
	}
	b, _ := json.Marshal(map[string]any{"n": len(tl.Points), "points": pts})
	return template.JS(b)
}

func segments(s *memsnap.Snapshot, d int) []segmentRow {
	var segs []memsnap.Segment
	var biggest int64 = 1
	for _, seg := range s.Segments {
		if seg.Device == d {
			segs = append(segs, seg)
			biggest = max(biggest, seg.TotalSize)
		}
	}
	slices.SortFunc(segs, func(a, b memsnap.Segment) int { return cmp.Compare(a.Address, b.Address) })
	if len(segs) > maxSegments {
		segs = segs[:maxSegments]
	}
	var rows []segmentRow
	for _, seg := range segs {
		w := max(4, segBarW*float64(seg.TotalSize)/float64(biggest))
		r := segmentRow{Width: w, Label: fmt.Sprintf("%#x %s %s%s stream %d", seg.Address, FormatBytes(seg.TotalSize), seg.SegmentType,
			map[bool]string{true: " expandable", false: ""}[seg.IsExpandable], seg.Stream)}
		var off int64
		for _, b := range seg.Blocks {
			bx := w * float64(off) / float64(max(seg.TotalSize, 1))
			bw := w * float64(b.Size) / float64(max(seg.TotalSize, 1))
			title := fmt.Sprintf("%#x: %s %s", b.Address, FormatBytes(b.Size), b.State)
			if b.State != "inactive" {
				title += fmt.Sprintf(" (requested %s) %s", FormatBytes(b.RequestedSize), memsnap.SiteLabel(b.Frames, b.Op))
			}
			r.Blocks = append(r.Blocks, blockRect{X: bx, W: max(bw, 0.5), Class: "block " + b.State, Title: title})
			off += b.Size
		}
		rows = append(rows, r)
	}
	return rows
}

func largest(s *memsnap.Snapshot, d int) []largeRow {
	var rows []largeRow
	for _, seg := range s.Segments {
		if seg.Device != d {
			continue
		}
		for _, b := range seg.Blocks {
			if b.State != "active_allocated" {
				continue
			}
			r := largeRow{Size: b.Size, Requested: b.RequestedSize, Segment: fmt.Sprintf("%#x", seg.Address), Site: memsnap.SiteLabel(b.Frames, b.Op)}
			for _, f := range b.Frames {
				r.Stack = append(r.Stack, fmt.Sprintf("%s  %s:%d", f.Name, f.Filename, f.Line))
			}
			rows = append(rows, r)
		}
	}
	slices.SortStableFunc(rows, func(a, b largeRow) int { return cmp.Compare(b.Size, a.Size) })
	if len(rows) > maxLargest {
		rows = rows[:maxLargest]
	}
	return rows
}

// FormatBytes is n in B, KiB, MiB, GiB or TiB with up to one decimal.
func FormatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v := float64(n)
	u := 0
	for u < len(units)-1 && (v >= 1024 || v <= -1024) {
		v /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}
