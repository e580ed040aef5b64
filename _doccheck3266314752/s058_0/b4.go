package p

import (
	recorder "github.com/subletml/sublet/alloc/recorder"
)

func _() {
{
//line docs/observability.md:87
r, _ := recorder.Start(a)
// ... run ...
r.WriteFile("run.jsonl.gz")   // sublet replay -trace run.jsonl.gz -conf expandable_segments:True

}
}
