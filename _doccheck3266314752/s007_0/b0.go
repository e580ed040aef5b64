package p

import (
	recorder "github.com/subletml/sublet/alloc/recorder"
)

func _() {
{
//line alloc/recorder/recorder.go:5
r, err := recorder.Start(a)      // a is the device's *alloc.Allocator
// ... run the workload ...
err = r.WriteFile("run.jsonl.gz") // then: sublet replay -trace run.jsonl.gz -conf expandable_segments:True
}
}
