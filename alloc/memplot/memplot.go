// Package memplot draws memory over time as a PNG (gonum/plot): allocated, reserved and
// active bytes after each event of a snapshot's trace (memsnap.TimelineOf) or of a
// replayed trace (replay.Result's series), with the OOM moments marked.
//
//	s, _ := memsnap.ReadFile("snap.pickle")
//	tl, _ := memsnap.TimelineOf(s, 0)
//	err := memplot.WritePNG(f, memplot.FromTimeline(tl), "my run")
package memplot

import (
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/subletml/sublet/alloc/memsnap"
	"github.com/subletml/sublet/alloc/replay"
)

// Series is memory after each event, in bytes; the three slices have one entry per
// event.
type Series struct {
	Allocated, Reserved, Active []int64
	// OOMs are the indices of the events that ran out of memory.
	OOMs []int
}

// FromTimeline is a snapshot timeline's series.
func FromTimeline(tl *memsnap.Timeline) Series {
	s := Series{OOMs: tl.OOMs}
	for _, p := range tl.Points {
		s.Allocated = append(s.Allocated, p.Allocated)
		s.Reserved = append(s.Reserved, p.Reserved)
		s.Active = append(s.Active, p.Active)
	}
	return s
}

// FromReplay is the series of a replay run with Options.Series; an event after which
// num_ooms grew is an OOM.
func FromReplay(r *replay.Result) (Series, error) {
	col := map[string]int{}
	for i, k := range r.Keys {
		col[k] = i
	}
	need := []string{"allocated_bytes.all.current", "reserved_bytes.all.current", "active_bytes.all.current", "num_ooms"}
	for _, k := range need {
		if _, ok := col[k]; !ok {
			return Series{}, fmt.Errorf("memplot: the replay's series has no %q column", k)
		}
	}
	var s Series
	var ooms int64
	for i, row := range r.Series {
		s.Allocated = append(s.Allocated, row[col[need[0]]])
		s.Reserved = append(s.Reserved, row[col[need[1]]])
		s.Active = append(s.Active, row[col[need[2]]])
		if n := row[col[need[3]]]; n > ooms {
			s.OOMs, ooms = append(s.OOMs, i), n
		}
	}
	return s, nil
}

// Colours of the lines, of the area under allocated, and of the OOM markers.
var (
	ReservedColour  = color.RGBA{R: 0x22, G: 0x22, B: 0x22, A: 0xff}
	AllocatedColour = color.RGBA{R: 0x4e, G: 0x79, B: 0xa7, A: 0xff}
	AllocatedFill   = color.RGBA{R: 0xc6, G: 0xd6, B: 0xe8, A: 0xff}
	ActiveColour    = color.RGBA{R: 0xf2, G: 0x8e, B: 0x2b, A: 0xff}
	OOMColour       = color.RGBA{R: 0xdd, A: 0xff}
)

// Size of the image.
const Width, Height = 10 * vg.Inch, 5 * vg.Inch

// WritePNG draws s (at most 4000 points per line: the highest value of each span, so
// peaks survive) as a PNG with title, in the unit its largest value reads best in
// (45 MiB in MiB, not 0.04 GiB). Allocated is an area, active a line on its top edge
// (active holds allocated, so where the two are equal the line shows on the area's
// edge instead of disappearing under it), reserved a dashed line.
func WritePNG(w io.Writer, s Series, title string) error {
	n := len(s.Allocated)
	if n == 0 || len(s.Reserved) != n || len(s.Active) != n {
		return fmt.Errorf("memplot: %d allocated, %d reserved and %d active points: want the same number, at least one", n, len(s.Reserved), len(s.Active))
	}
	var most int64
	for _, v := range [][]int64{s.Allocated, s.Reserved, s.Active} {
		for _, x := range v {
			most = max(most, x)
		}
	}
	unit, per := unitOf(most)
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "event"
	p.Y.Label.Text = unit
	p.Add(plotter.NewGrid())
	var top float64
	for _, l := range []struct {
		name string
		v    []int64
		c    color.Color
		fill color.Color
		dash []vg.Length
	}{
		{"allocated", s.Allocated, AllocatedColour, AllocatedFill, nil},
		{"active", s.Active, ActiveColour, nil, nil},
		{"reserved", s.Reserved, ReservedColour, nil, []vg.Length{vg.Points(4), vg.Points(2)}},
	} {
		pts := sample(l.v, per)
		for _, q := range pts {
			top = max(top, q.Y)
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		line.Color, line.Width, line.Dashes, line.FillColor = l.c, vg.Points(1.5), l.dash, l.fill
		if l.fill != nil {
			line.Width = vg.Points(0.75)
		}
		p.Add(line)
		p.Legend.Add(l.name, line)
	}
	if top == 0 {
		top = 1
	}
	for _, i := range s.OOMs {
		m, err := plotter.NewLine(plotter.XYs{{X: float64(i), Y: 0}, {X: float64(i), Y: top}})
		if err != nil {
			return err
		}
		m.Color, m.Width = OOMColour, vg.Points(1)
		p.Add(m)
	}
	if len(s.OOMs) > 0 {
		p.Title.Text += fmt.Sprintf(" (%d OOMs, red)", len(s.OOMs))
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Y.Min, p.Y.Max = 0, top*1.2 // room for the legend above the lines
	c := vgimg.PngCanvas{Canvas: vgimg.New(Width, Height)}
	p.Draw(draw.New(c))
	_, err := c.WriteTo(w)
	return err
}

// maxPoints bounds the points drawn per line.
const maxPoints = 4000

// unitOf is the unit bytes up to most read best in, and its size: the largest whose
// one is at most most (B below a KiB).
func unitOf(most int64) (string, float64) {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for i < len(units)-1 && most >= 1<<(10*(i+1)) {
		i++
	}
	return units[i], float64(int64(1) << (10 * i))
}

// sample returns v in units of per bytes against the event index, at most maxPoints
// of them.
func sample(v []int64, per float64) plotter.XYs {
	n := len(v)
	step := max(1, (n+maxPoints-1)/maxPoints)
	pts := make(plotter.XYs, 0, n/step+1)
	for lo := 0; lo < n; lo += step {
		best := lo
		for i := lo; i < min(lo+step, n); i++ {
			if v[i] > v[best] {
				best = i
			}
		}
		pts = append(pts, plotter.XY{X: float64(best), Y: float64(v[best]) / per})
	}
	return pts
}
