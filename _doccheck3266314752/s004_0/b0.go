package p

import (
	memsnap "github.com/subletml/sublet/alloc/memsnap"
)

func _() {
{
//line alloc/memsnap/snapshot.go:8
s := memsnap.From(a.MemorySnapshot())
err := memsnap.WriteFile("snap.pickle", s) // or snap.json
}
}
