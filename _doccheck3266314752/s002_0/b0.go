package p

import (
	memplot "github.com/subletml/sublet/alloc/memplot"
	memsnap "github.com/subletml/sublet/alloc/memsnap"
)

func _() {
{
//line alloc/memplot/memplot.go:5
s, _ := memsnap.ReadFile("snap.pickle")
tl, _ := memsnap.TimelineOf(s, 0)
err := memplot.WritePNG(f, memplot.FromTimeline(tl), "my run")
}
}
