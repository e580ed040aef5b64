package alloc

import (
	"cmp"
	"slices"
)

// Registered returns the allocator of every device For or ForConfig has created, by
// device name: what a metrics collector or a live view shows.
func Registered() []*Allocator {
	registry.Lock()
	out := make([]*Allocator, 0, len(registry.m))
	for _, a := range registry.m {
		out = append(out, a)
	}
	registry.Unlock()
	slices.SortFunc(out, func(x, y *Allocator) int { return cmp.Compare(x.dev.Name(), y.dev.Name()) })
	return out
}
