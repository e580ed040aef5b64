package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/subletml/sublet/alloc/memviz"
)

// deviceView is what top shows of one device.
type deviceView struct {
	Name string
	// Free and Total are the device's memory; -1 when unknown.
	Free, Total                                      int64
	Allocated, Reserved, Active, InactiveSplit, OOMs int64
	// Sites are the largest allocation sites by live bytes (memory history on).
	Sites []siteRow
}

type siteRow struct {
	Label         string
	Bytes, Blocks int64
}

// renderTop lays out one frame.
func renderTop(views []deviceView, status string, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sublet top - %s - %s   (q quits)\n\n", now.Format("15:04:05"), status)
	fmt.Fprintf(&b, "%-12s %10s %10s %10s %10s %10s %7s %10s %5s\n", "DEVICE", "USED", "TOTAL", "ALLOCATED", "RESERVED", "CACHED", "FRAG", "NONRELEAS", "OOMS")
	for _, v := range views {
		used, total := "?", "?"
		if v.Total >= 0 {
			used, total = memviz.FormatBytes(v.Total-v.Free), memviz.FormatBytes(v.Total)
		}
		frag := "-"
		if v.Reserved > 0 {
			frag = fmt.Sprintf("%.1f%%", 100*float64(v.Reserved-v.Allocated)/float64(v.Reserved))
		}
		fmt.Fprintf(&b, "%-12s %10s %10s %10s %10s %10s %7s %10s %5d\n", v.Name, used, total, memviz.FormatBytes(v.Allocated),
			memviz.FormatBytes(v.Reserved), memviz.FormatBytes(v.Reserved-v.Allocated), frag, memviz.FormatBytes(v.InactiveSplit), v.OOMs)
		if v.Total > 0 {
			fmt.Fprintf(&b, "  [%s]\n", bar(v, 60))
		}
	}
	for _, v := range views {
		if len(v.Sites) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\nlargest sites on %s:\n", v.Name)
		for _, s := range v.Sites {
			fmt.Fprintf(&b, "  %10s %6d blocks  %s\n", memviz.FormatBytes(s.Bytes), s.Blocks, s.Label)
		}
	}
	return b.String()
}

// bar draws the device's memory: # allocated, + cached by the allocator, - used by
// others, space free.
func bar(v deviceView, width int) string {
	cells := func(n int64) int { return int(float64(n) / float64(v.Total) * float64(width)) }
	a := cells(v.Allocated)
	c := max(0, cells(v.Reserved)-a)
	o := max(0, cells(v.Total-v.Free)-a-c)
	free := max(0, width-a-c-o)
	return strings.Repeat("#", a) + strings.Repeat("+", c) + strings.Repeat("-", o) + strings.Repeat(" ", free)
}
