package tensor

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
)

// How String prints values, PyTorch's defaults (torch.set_printoptions): tensors of more
// than printThreshold elements are summarized to the first and last printEdge items of
// each long dimension; lines wrap at printWidth columns.
const (
	printThreshold = 1000
	printEdge      = 3
	printWidth     = 80
)

// formatValues is t's values as PyTorch prints them, nested brackets indented by indent
// columns after the first line; ok is false when there are none to show (a released
// handle, a device that keeps no data, a failed read).
func (t *Tensor) formatValues(indent int) (s string, ok bool) {
	if t.h.released.Load() || (t.st.res == device.Meta && t.Numel() > 0) {
		return "", false
	}
	summarize := t.Numel() > printThreshold
	var items []string
	var width int
	err := Try(func() {
		if t.dt.IsFloat() {
			items, width = newNumberFormat(readShown[float64](t, summarize)).formatAll()
		} else {
			items, width = formatInts(t.dt, readShown[int64](t, summarize)) // int64: every value exact
		}
	})
	if err != nil {
		return "", false
	}
	next := 0
	var b strings.Builder
	write(&b, shownShape(t.shape, summarize), width, summarize, indent, func() string {
		next++
		return items[next-1]
	})
	return b.String(), true
}

// shownShape is, per dimension, how many items String shows (with a summary, at most
// 2·printEdge).
func shownShape(shape []int, summarize bool) []int {
	out := make([]int, len(shape))
	for i, n := range shape {
		out[i] = n
		if summarize && n > 2*printEdge {
			out[i] = 2 * printEdge
		}
	}
	return out
}

// readShown returns the values String shows, in row-major order of the shown items:
// all of them, or, summarized, each long dimension's first and last printEdge. A GPU
// tensor's are downloaded, one row run at a time when summarized. T holds every value
// of t's type (float64 for a floating t, int64 for the others).
func readShown[T float64 | int64](t *Tensor, summarize bool) []T {
	read := ToSlice[T]
	if !summarize || len(t.shape) == 0 {
		return read(t)
	}
	idx := make([][]int, len(t.shape)) // the shown indices of each dimension
	for d, n := range t.shape {
		for i := range n {
			if n <= 2*printEdge || i < printEdge || i >= n-printEdge {
				idx[d] = append(idx[d], i)
			}
		}
	}
	last := len(t.shape) - 1
	var out []T
	pos := make([]int, last) // position in idx of each leading dimension
	for {
		off := t.offset
		for d, p := range pos {
			off += idx[d][p] * t.strides[d]
		}
		// The last dimension's shown items are one or two runs of consecutive indices.
		row := idx[last]
		for start := 0; start < len(row); {
			end := start + 1
			for end < len(row) && row[end] == row[end-1]+1 {
				end++
			}
			run := &Tensor{shape: []int{end - start}, strides: t.strides[last:], offset: off + row[start]*t.strides[last],
				dt: t.dt, st: t.st, h: t.h}
			out = append(out, read(run)...)
			start = end
		}
		d := last - 1
		for ; d >= 0; d-- {
			if pos[d]++; pos[d] < len(idx[d]) {
				break
			}
			pos[d] = 0
		}
		if d < 0 {
			return out
		}
	}
}

// numberFormat is how one floating tensor's elements print: all alike, right-aligned to
// the widest nonzero finite value (PyTorch's _Formatter).
type numberFormat struct {
	vals []float64
	ints bool // all are integers: they print as "3."
	sci  bool // they print as 1.2345e+03
}

func newNumberFormat(vals []float64) *numberFormat {
	f := &numberFormat{vals: vals, ints: true}
	lo, hi := math.Inf(1), 0.0
	for _, v := range vals {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			continue
		}
		if v != math.Ceil(v) {
			f.ints = false
		}
		if a := math.Abs(v); a != 0 {
			lo, hi = min(lo, a), max(hi, a)
		}
	}
	if hi > 0 {
		f.sci = hi/lo > 1000 || hi > 1e8 || (!f.ints && lo < 1e-4)
	}
	return f
}

// formatAll prints each value, unpadded, and returns the width to pad them to.
func (f *numberFormat) formatAll() (items []string, width int) {
	items = make([]string, len(f.vals))
	for i, v := range f.vals {
		items[i] = f.format(v)
		// PyTorch sizes float columns by the nonzero finite values alone.
		if v != 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
			width = max(width, len(items[i]))
		}
	}
	return items, width
}

// format prints v, unpadded.
func (f *numberFormat) format(v float64) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case f.sci:
		return strconv.FormatFloat(v, 'e', 4, 64)
	case f.ints:
		return strconv.FormatFloat(v, 'f', 0, 64) + "."
	}
	return strconv.FormatFloat(v, 'f', 4, 64)
}

// formatInts prints the values of an integer or Bool tensor of dt, unpadded, and
// returns the width to pad them to (the widest).
func formatInts(dt dtype.DType, vals []int64) (items []string, width int) {
	items = make([]string, len(vals))
	for i, v := range vals {
		if dt == dtype.Bool {
			items[i] = strconv.FormatBool(v != 0)
		} else {
			items[i] = strconv.FormatInt(v, 10)
		}
		width = max(width, len(items[i]))
	}
	return items, width
}

// write prints the shown items of shape (next gives each formatted value in turn,
// padded here to width) as nested brackets, PyTorch's layout: rows of the last
// dimension wrapped at printWidth, each deeper bracket one column further in, a blank
// line between blocks of rank 3 and up, " ..." (or "...") where a summary leaves items
// out.
func write(b *strings.Builder, shown []int, width int, summarize bool, indent int, next func() string) {
	pad := func(s string) string { return strings.Repeat(" ", max(0, width-len(s))) + s }
	if len(shown) == 0 {
		b.WriteString(next())
		return
	}
	gap := summarize && shown[0] == 2*printEdge
	b.WriteByte('[')
	if len(shown) == 1 {
		var items []string
		for i := range shown[0] {
			if gap && i == printEdge {
				items = append(items, " ...")
			}
			items = append(items, pad(next()))
		}
		perLine := max(1, (printWidth-indent)/(width+2))
		for i := 0; i < len(items); i += perLine {
			if i > 0 {
				b.WriteString(",\n" + strings.Repeat(" ", indent+1))
			}
			b.WriteString(strings.Join(items[i:min(i+perLine, len(items))], ", "))
		}
		b.WriteByte(']')
		return
	}
	sep := "," + strings.Repeat("\n", len(shown)-1) + strings.Repeat(" ", indent+1)
	for i := range shown[0] {
		if i > 0 {
			b.WriteString(sep)
		}
		if gap && i == printEdge {
			b.WriteString("..." + sep)
		}
		write(b, shown[1:], width, summarize, indent+1, next)
	}
	b.WriteByte(']')
}

// metadata is what String prints after the values.
func (t *Tensor) metadata() string {
	var b strings.Builder
	fmt.Fprintf(&b, "shape=%v, dtype=%v, device=%s", t.shape, t.dt, t.st.dev.Name())
	if t.requiresGrad {
		b.WriteString(", requires_grad")
	}
	if t.node != nil {
		fmt.Fprintf(&b, ", grad_fn=%s", t.node.Name())
	}
	if t.h.released.Load() {
		b.WriteString(", released")
	}
	return b.String()
}
