package replay

import (
	"maps"
	"slices"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
)

// Player replays a trace one event at a time, as Replay does, for a caller that paces
// it (a live view). Validate the events first: Apply assumes the liveness rules hold.
type Player struct {
	r replayer
}

// NewPlayer returns a player over a.
func NewPlayer(a *alloc.Allocator) *Player {
	return &Player{r: replayer{a: a, ptrs: make(map[int64]device.Ptr), streams: map[int64]device.Stream{0: 0}}}
}

// Apply replays one event; an OOM is not an error (its id stays not live).
func (p *Player) Apply(e Event) error { return p.r.apply(e) }

// Live returns the blocks of the ids still allocated, lowest id first.
func (p *Player) Live() []device.Ptr {
	var out []device.Ptr
	for _, id := range slices.Sorted(maps.Keys(p.r.ptrs)) {
		out = append(out, p.r.ptrs[id])
	}
	return out
}
