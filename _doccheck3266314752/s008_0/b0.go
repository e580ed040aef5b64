package p

import (
	replay "github.com/subletml/sublet/alloc/replay"
)

func _() {
{
//line alloc/replay/doc.go:6
events, err := replay.ReadFile("run.jsonl.gz")        // recorded by alloc/recorder, or Generate(kind, seed)
res, err := replay.Replay(a, events, true)            // through an allocator; res.Final is memory_stats()
final, err := replay.OnSim(events, "expandable_segments:True", 0, 0) // the quick "what if" on a simulated H200
}
}
