package alloc

import (
	"cmp"
	"slices"
)

// Registered returns the allocator of every device For or ForConfig has created, by
// device name, devices of one name in the order their allocators were made: what a
// metrics collector or a live view shows.
func Registered() []*Allocator {
	registry.Lock()
	out := slices.Clone(registry.order)
	registry.Unlock()
	slices.SortStableFunc(out, func(x, y *Allocator) int { return cmp.Compare(x.dev.Name(), y.dev.Name()) })
	return out
}
