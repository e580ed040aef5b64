package p

import (
	alloc "github.com/subletml/sublet/alloc"
	http "net/http"
	memprof "github.com/subletml/sublet/alloc/memprof"
)

func _() {
{
//line alloc/memprof/memprof.go:4
a.RecordHistory(alloc.HistoryOptions{})      // stacks are recorded from here on
// ... the workload ...
memprof.Write(f, a)                          // then: go tool pprof -top FILE
http.Handle("/debug/sublet/memory", memprof.Handler(nil))
}
}
