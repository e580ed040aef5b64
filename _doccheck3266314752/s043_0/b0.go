package p

import (
	os "os"
	profiler "github.com/subletml/sublet/profiler"
	tensor "github.com/subletml/sublet/tensor"
)

func _() {
{
//line profiler/profiler.go:7
p, err := profiler.Start(profiler.Options{}, a) // a: the devices' allocators
s := tensor.NewScope(tensor.WithOpHook(p)) // its ops (and their backward) are profiled
// ... the ops to profile, on tensors of s ...
p.Stop()
p.Table(os.Stdout, profiler.SortSelfTime, 10, false)
p.WriteChromeTrace(f) // open in ui.perfetto.dev or chrome://tracing
}
}
