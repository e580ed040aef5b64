package p

import (
	alloc "github.com/subletml/sublet/alloc"
	fmt "fmt"
)

func _() {
{
//line alloc/allocator.go:18
a, err := alloc.For(dev)      // dev's allocator, made on first use with SUBLET_ALLOC_CONF
p, err := a.Alloc(1<<20, 0)   // 1 MiB on stream 0, the default; an *OOMError when nothing fits
err = a.Free(p)               // the block goes back to the cache, not to the device
st := a.Stats()               // torch.cuda.memory_stats(); StatsMap has PyTorch's flat keys
fmt.Print(a.Summary(false))   // torch.cuda.memory_summary()
err = a.EmptyCache()          // cached segments without live blocks go back to the device
}
}
