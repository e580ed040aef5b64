package p

import (
	data "github.com/subletml/sublet/data"
	tensor "github.com/subletml/sublet/tensor"
)

func _() {
{
//line data/doc.go:7
ld, err := data.NewLoader(ds, data.Shuffle{N: ds.Len(), Batch: 64, Seed: 1},
	data.Config{Device: dev, Prefetch: 2, Pinned: host})
it := ld.Epoch(0)
defer it.Close()
for {
	b, err := it.Next()
	if err != nil || b == nil {
		break // err is the loader's failure; nil, nil is the end of the epoch
	}
	s := tensor.NewScope()
	loss := trainStep(s.Bind(b.X), s.Bind(b.Y)) // a step's inputs belong to its scope
	s.Close()
	b.Release()
}
}
}
