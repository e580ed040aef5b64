package p

import (
	memsnap "github.com/subletml/sublet/alloc/memsnap"
)

func _() {
{
//line docs/observability.md:32
memsnap.WriteFile("snap.pickle", memsnap.From(a.MemorySnapshot()))   // or snap.json

}
}
