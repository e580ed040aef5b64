package alloc

// planned is PolicyPlanned: the caching path (PyTorch's decisions over 2 MiB-page
// segments where the device has virtual memory management) with plan-and-replay on
// top. Every event is compared as a sig; once the detector confirms a period, the
// period is laid out (planPeriod) and, at its quietest position, its arenas are taken
// from cached memory. From then on each event is checked against the plan: the expected
// allocation of a slot takes it, the expected free gives it back, anything else ends
// the plan, whose arenas dissolve into the caching structures, and the event takes the
// caching path. All fields are guarded by Allocator.mu.
type planned struct {
	a *Allocator
	// serial is the number of allocations served so far.
	serial int64
	det    detector
	// laidOut is the detector's run (its start and period) of the latest layout: a
	// period is laid out once per run.
	laidOut [2]int64
	// next is a plan laid out but not started: it follows the events until its start
	// position comes round and its arenas find room.
	next *plan
	// cur is the plan being followed; its arenas are taken.
	cur *plan
	// highWater is the most memory reserved so far, the stitching limit.
	highWater int64
	// trim is what the latest TrimIdle saw.
	trim trimState
	// stats are PlanStats' counters.
	stats PlanStats
}

// PlanStats says what the planned policy's plans did; all zero under PyTorch's policy.
type PlanStats struct {
	// Plans counts the plans started; Ended those that ended: an event the plan did
	// not expect, EmptyCache, a capture, or the device refusing memory.
	Plans, Ended int64
	// Served counts the allocations served from plans' slots.
	Served int64
	// Period is the running plan's period in events (allocations and frees), 0 when
	// none runs; ArenaBytes the bytes its arenas hold.
	Period     int
	ArenaBytes int64
}

// PlanStats returns the planned policy's counters.
func (a *Allocator) PlanStats() PlanStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.plan
	if p == nil {
		return PlanStats{}
	}
	st := p.stats
	if c := p.cur; c != nil {
		st.Period = c.period
		for _, ar := range c.arenas {
			if ar != nil {
				st.ArenaBytes += ar.block.size
			}
		}
	}
	return st
}

// plan is a layout being followed.
type plan struct {
	*layout
	// pos is the position of the next event.
	pos int
	ss  *streamState
	// blocks are the slots' blocks (nil until the arenas are taken); arenas by pool.
	blocks []*block
	arenas [3]*arena
}

func (c *plan) advance() {
	if c.pos++; c.pos == c.period {
		c.pos = 0
	}
}

func newPlanned(a *Allocator) *planned { return &planned{a: a} }

func (p *planned) malloc(r *request) (*block, error) {
	a := p.a
	if r.lifetime.longLived() && r.ss.pool == nil {
		r.ss = a.stateOf(r.ss.stream, true)
	}
	x := allocSig(r.size, r.ss.stream)
	if c := p.cur; c != nil {
		if x == c.sigs[c.pos] {
			slot := c.slotAt[c.pos]
			c.advance()
			if slot >= 0 {
				b := c.blocks[slot]
				a.countAlloc(r, b)
				p.stats.Served++
				p.stamp(b)
				p.det.push(x)
				return b, nil
			}
		} else {
			p.stop()
		}
	}
	b, err := p.cachingMalloc(r)
	if err != nil {
		return nil, err
	}
	p.stamp(b)
	p.after(x)
	return b, nil
}

// cachingMalloc is the caching path: PyTorch's malloc, with page stitching before the
// miss path where the device has virtual memory management.
func (p *planned) cachingMalloc(r *request) (*block, error) {
	a := p.a
	b := a.getFreeBlock(r)
	if b == nil && a.expandable {
		var err error
		if b, err = a.stitch(r, p.limit(), false); err != nil {
			return nil, a.wrapErr(r, err)
		}
	}
	if b == nil {
		var err error
		if b, err = a.mallocSlow(r); err != nil {
			return nil, err
		}
	}
	b = a.allocFoundBlock(r, b)
	p.highWater = max(p.highWater, a.totalAllocated)
	return b, nil
}

// limit is the reserved memory stitching keeps to: the most ever reserved.
func (p *planned) limit() int64 { return max(p.highWater, p.a.totalAllocated) }

// arenaLimit is the reserved memory a plan's arenas may bring: the most ever reserved,
// or 1/32 over the peak of allocated memory. A plan needs, at its start, the arenas
// beside the blocks live across the start, which the caching path holds until the
// plan's first period frees them; the caching path may have packed the same blocks a
// little tighter. The margin keeps plans from being refused for that while bounding
// what they cost.
func (p *planned) arenaLimit() int64 {
	peak := p.a.stats.AllocatedBytes[StatAll].Peak
	return max(p.limit(), peak+peak/arenaMargin)
}

// arenaMargin is the share of the allocated peak (1/arenaMargin) a plan's arenas may
// reserve beyond the high-water mark.
const arenaMargin = 32

func (p *planned) stamp(b *block) {
	b.serial = p.serial
	p.serial++
}

func (p *planned) free(b *block) error {
	x := freeSig(p.serial - b.serial)
	if c := p.cur; c != nil {
		if x == c.sigs[c.pos] && len(b.streamUses) == 0 {
			c.advance()
			if b.arena != nil {
				p.a.freeSlot(b)
				p.det.push(x)
				return nil
			}
		} else {
			p.stop()
		}
	}
	if err := p.a.cachingFree(b); err != nil {
		p.pause()
		return err
	}
	p.fenceFree(b)
	p.after(x)
	return nil
}

// relieve makes room for r when the device or the memory fraction refused its memory:
// the plan pauses (its arenas' free gaps may hold r), and whole free pages elsewhere
// are unmapped, as many as r's pages.
func (p *planned) relieve(r *request) bool {
	a := p.a
	relieved := p.cur != nil
	p.pause()
	if !a.expandable || len(a.captures) > 0 {
		return relieved
	}
	c, err := a.findExpandableBlock(r)
	if err != nil {
		return relieved
	}
	victims, _ := a.pageVictims(c.addr, runEnd(c, r.rounded))
	done, _ := a.reclaimPages(victims, pagesToMap(c, r.rounded))
	return relieved || done > 0
}

func (p *planned) settle() { p.pause() }

// stop ends the plan being followed, whose sequence the events left: its arenas
// dissolve.
func (p *planned) stop() {
	c := p.cur
	if c == nil {
		return
	}
	p.cur = nil
	p.stats.Ended++
	for _, ar := range c.arenas {
		if ar != nil {
			seg := ar.block.seg
			p.a.dissolve(ar)
			// The arena's free gaps are free blocks now, which stitching may unmap.
			if seg.expandable && len(p.a.captures) == 0 {
				p.recordFence(seg.ss)
			}
		}
	}
}

// pause ends the plan being followed while its sequence goes on (the memory is wanted
// back): its arenas dissolve, and it waits to start again at its start position.
func (p *planned) pause() {
	c := p.cur
	if c == nil {
		return
	}
	p.stop()
	c.arenas, c.blocks = [3]*arena{}, nil
	p.next = c
}

// after observes event x, just served by the caching path: the detector sees it, a
// waiting plan follows it, and a confirmed period gets its layout.
func (p *planned) after(x sig) {
	confirmed := p.det.push(x)
	a := p.a
	if p.cur != nil {
		return
	}
	if len(a.captures) > 0 {
		p.next = nil // a capture's requests are routed to its pool: no plan
		return
	}
	if c := p.next; c != nil {
		if x != c.sigs[c.pos] {
			p.next = nil
			return
		}
		if c.advance(); c.pos == c.start {
			p.begin()
		}
		return
	}
	run := [2]int64{p.det.n - p.det.run, p.det.period}
	if !confirmed || run == p.laidOut {
		return
	}
	p.laidOut = run
	l := planPeriod(p.det.window(p.det.period), a.RoundSize)
	if l == nil {
		return
	}

	p.next = &plan{layout: l, ss: a.streamState(l.stream)}
	if l.start == 0 {
		p.begin()
	}
}

// begin starts the waiting plan if its arenas find room in cached memory; otherwise it
// waits for its start position to come round again.
func (p *planned) begin() {
	c, a := p.next, p.a
	for k, size := range c.arenaSize {
		if size == 0 {
			continue
		}
		if c.arenas[k] = p.carveArena(poolKind(k), size, c.ss); c.arenas[k] == nil {
			for _, ar := range c.arenas[:k] {
				if ar != nil {
					a.dissolve(ar)
				}
			}
			c.arenas = [3]*arena{}
			return
		}
	}
	c.blocks = make([]*block, len(c.slots))
	for i, s := range c.slots {
		c.blocks[i] = c.arenas[s.kind].slot(a, s.off, s.size)
	}
	p.next, p.cur = nil, c
	p.stats.Plans++
}
