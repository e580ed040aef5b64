package alloc

import (
	"cmp"
	"slices"

	"github.com/subletml/sublet/device"
)

// A plan serves one period of a repeating event sequence from arenas laid out offline:
// each allocation of the period that is freed less than a period later gets a slot, a
// fixed offset in its pool's arena, chosen so that no two slots live at the same time
// overlap. Lifetimes are intervals on the circle of the period's positions, so a tensor
// allocated late in one step and freed early in the next (a gradient kept until
// zero_grad) is placed like any other. The rest (longer-lived allocations, other
// streams) go to the caching path, as the plan says at their position.
//
// Following a plan only needs each event to be the one expected: the live slots at any
// position are then exactly those the layout assumed, whatever phase the plan started
// at, because every slot starts empty and slots live across the start were served by
// the caching path.

// slotPlan is one slot of a plan's layout.
type slotPlan struct {
	// pos is the period position of the allocation; life is the number of events until
	// its free (1 ≤ life < period).
	pos, life int
	// size is the rounded size, kind the pool, off the offset in the pool's arena.
	size int64
	kind poolKind
	off  int64
}

// layout is what planPeriod computes from two periods of events.
type layout struct {
	period int
	// sigs are the period's events; position 0 is the event after the window.
	sigs []sig
	// slotAt gives, for each position, the slot of its allocation, or −1 (a free, or an
	// allocation the caching path serves).
	slotAt []int32
	slots  []slotPlan
	// arenaSize is the bytes each pool's arena needs.
	arenaSize [3]int64
	// stream is the stream of the planned allocations.
	stream device.Stream
	// start is the position with the fewest bytes in live slots: where the plan
	// starts, so that its arenas find the most free memory.
	start int
}

// planPeriod lays out the second half of window, two identical periods of events. It
// returns nil when nothing in the period can be planned.
func planPeriod(window []sig, round func(int64) int64) *layout {
	p := len(window) / 2
	l := &layout{period: p, sigs: slices.Clone(window[p:]), slotAt: make([]int32, p)}
	// Number the window's allocations 0, 1, ...; a free at index f of distance d frees
	// allocation (allocations before f) − d.
	allocIndex := make([]int, 0, p)
	freedAt := map[int]int{}
	stream, haveStream := device.Stream(0), false
	for i, x := range window {
		if x.v > 0 {
			allocIndex = append(allocIndex, i)
			if i >= p && !haveStream {
				stream, haveStream = x.s, true
			}
			continue
		}
		if j := len(allocIndex) + int(x.v); j >= 0 {
			freedAt[j] = i
		}
	}
	if !haveStream {
		return nil
	}
	l.stream = stream
	perPeriod := len(allocIndex) / 2
	for j := perPeriod; j < len(allocIndex); j++ {
		i := allocIndex[j]
		pos := i - p
		l.slotAt[pos] = -1
		life := -1
		if f, ok := freedAt[j]; ok {
			life = f - i
		} else if f, ok := freedAt[j-perPeriod]; ok {
			life = f - allocIndex[j-perPeriod]
		}
		x := window[i]
		if life < 1 || life >= p || x.s != stream {
			continue
		}
		size := round(x.v)
		l.slotAt[pos] = int32(len(l.slots))
		l.slots = append(l.slots, slotPlan{pos: pos, life: life, size: size, kind: kindOf(size)})
	}
	for i, x := range l.sigs {
		if x.v < 0 {
			l.slotAt[i] = -1
		}
	}
	if len(l.slots) == 0 {
		return nil
	}
	l.place()
	l.start = l.quietest()
	return l
}

// overlaps reports whether two slots live at a common position of the period.
func (l *layout) overlaps(x, y *slotPlan) bool {
	p := l.period
	return (y.pos-x.pos+p)%p < x.life || (x.pos-y.pos+p)%p < y.life
}

// place gives every slot its offset: largest first, each into the smallest gap left by
// the slots already placed that live at the same time, or above them all (greedy by
// size with best fit, as TFLite's arena planner and XLA's heap simulator do).
func (l *layout) place() {
	order := make([]int, len(l.slots))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int {
		return cmp.Or(cmp.Compare(l.slots[j].size, l.slots[i].size), cmp.Compare(l.slots[j].life, l.slots[i].life))
	})
	type span struct{ off, end int64 }
	var placed []int
	var busy []span
	for _, i := range order {
		s := &l.slots[i]
		busy = busy[:0]
		for _, j := range placed {
			if t := &l.slots[j]; t.kind == s.kind && l.overlaps(s, t) {
				busy = append(busy, span{t.off, t.off + t.size})
			}
		}
		slices.SortFunc(busy, func(x, y span) int { return cmp.Compare(x.off, y.off) })
		best, bestGap := int64(-1), int64(-1)
		var end int64
		for _, b := range busy {
			if gap := b.off - end; gap >= s.size && (bestGap < 0 || gap < bestGap) {
				best, bestGap = end, gap
			}
			end = max(end, b.end)
		}
		if best < 0 {
			best = end
		}
		s.off = best
		l.arenaSize[s.kind] = max(l.arenaSize[s.kind], best+s.size)
		placed = append(placed, i)
	}
}

// quietest returns the position before which the live slots hold the fewest bytes.
func (l *layout) quietest() int {
	p := l.period
	// after[e] is the bytes of slots live after event e: a slot is from its
	// allocation's event to the one before its free, around the circle.
	diff := make([]int64, p+1)
	add := func(lo, hi int, n int64) { diff[lo] += n; diff[hi+1] -= n }
	for _, s := range l.slots {
		if hi := s.pos + s.life - 1; hi < p {
			add(s.pos, hi, s.size)
		} else {
			add(s.pos, p-1, s.size)
			add(0, hi-p, s.size)
		}
	}
	after := make([]int64, p)
	var run int64
	for e := range p {
		run += diff[e]
		after[e] = run
	}
	best := 0
	for i := range p {
		if after[(i+p-1)%p] < after[(best+p-1)%p] {
			best = i
		}
	}
	return best
}
