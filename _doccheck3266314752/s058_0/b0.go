package p

import (
	alloc "github.com/subletml/sublet/alloc"
)

func _() {
{
//line docs/observability.md:10
a, _ := alloc.For(dev)
a.RecordHistory(alloc.HistoryOptions{Trace: true, MaxEntries: 100_000})
// ... run ...
s := a.MemorySnapshot()   // segments, blocks with their allocating stacks, the event ring

}
}
