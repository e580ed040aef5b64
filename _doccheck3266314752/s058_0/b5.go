package p

import (
	os "os"
	profiler "github.com/subletml/sublet/profiler"
)

func _() {
{
//line docs/observability.md:108
p, _ := profiler.Start(profiler.Options{Sites: true}, a)
// ... ops call p.OpBegin(op, dev) / p.OpEnd(token) ...
p.Stop()
p.Table(os.Stdout, profiler.SortSelfTime, 10, false)   // key_averages().table(sort_by=...)
p.WriteChromeTrace(f)                                  // ui.perfetto.dev

}
}
