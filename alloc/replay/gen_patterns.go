package replay

// Synthetic generators: lifetimes and size distributions chosen to drive one allocator
// mechanism each (best fit across sizes, segment growth, small-pool split/merge,
// oversize blocks, power-of-two rounding).

// genRandom: 8000 steps over 192 slots; a step frees a live slot or fills an empty one
// (60% below 1 MiB, 30% 1-16 MiB, 10% 16-256 MiB, unaligned); every 1000 steps about
// half the live slots are freed at once.
func genRandom(b *builder) {
	r := b.r
	s := newSlots(192)
	size := func() int64 {
		switch c := r.intn(10); {
		case c < 6:
			return r.logSize(1, mib)
		case c < 9:
			return r.logSize(mib, 16*mib)
		default:
			return r.logSize(16*mib, 256*mib)
		}
	}
	for i := range 8000 {
		s.step(b, r.intn(int64(len(s))), size, noBudget)
		if i%1000 == 999 {
			for j, id := range s {
				if id >= 0 && r.chance(1, 2) {
					b.free(id)
					s[j] = -1
				}
			}
		}
	}
	s.clear(b)
}

// genGrowing: three rounds of 3-5 buffers reallocated 6-12% larger every step (new
// block first, then the old one freed) until the largest passes 256 MiB, with a fixed
// workspace and an output proportional to the first buffer allocated and freed per step.
func genGrowing(b *builder) {
	r := b.r
	for range 3 {
		n := r.between(3, 5)
		bufs, sizes := make([]int64, n), make([]int64, n)
		for i := range bufs {
			sizes[i] = r.between(256*kib, 4*mib)
			bufs[i] = b.alloc(sizes[i])
		}
		work := r.between(4*mib, 12*mib)
		for largest := int64(0); largest < 256*mib; {
			for i := range bufs {
				sizes[i] += sizes[i] * r.between(1, 2) / 16
				largest = max(largest, sizes[i])
				next := b.alloc(sizes[i])
				b.free(bufs[i])
				bufs[i] = next
			}
			w, out := b.alloc(work), b.alloc(sizes[0]/8)
			b.free(w, out)
		}
		b.freeShuffled(bufs)
	}
}

// genSmallChurn: the bench's 64-slot LCG churn (x = x*6364136223846793005 +
// 1442695040888963407, slot (x>>33)%64) for 15000 steps with sizes 512..1 MiB and one in
// eight below 512 B; every 500 steps a small pin is allocated and the oldest of more than
// six is freed, so some 2 MiB segments never empty.
func genSmallChurn(b *builder) {
	x := b.r.uint64()
	s := newSlots(64)
	size := func() int64 {
		if (x>>7)%8 == 0 {
			return int64(1 + (x>>40)%511)
		}
		return int64(512 * (1 + (x>>17)%2048))
	}
	var pins []int64
	for i := range 15000 {
		x = x*6364136223846793005 + 1442695040888963407
		s.step(b, int64((x>>33)%64), size, noBudget)
		if i%500 == 0 {
			pins = append(pins, b.alloc(int64(512*(1+(x>>45)%64))))
		}
		if len(pins) > 6 {
			b.free(pins[0])
			pins = pins[1:]
		}
	}
	s.clear(b)
	b.free(pins...)
}

// genOversize: 2500 steps over 24 slots with at most 3 GiB live; sizes in clusters
// 1-19, 20-64, 64-200 and 200-420 MiB plus exact 20/64/200 MiB +-512 B; half the frees
// are followed by a request up to 40 MiB larger or smaller than the freed block, which
// is what max_non_split_rounding_mb decides about.
func genOversize(b *builder) {
	r := b.r
	const budget = 3 * gib
	s := newSlots(24)
	size := func() int64 {
		switch c := r.intn(9); {
		case c < 2:
			return r.between(mib, 19*mib)
		case c < 4:
			return r.between(20*mib, 64*mib)
		case c < 6:
			return r.between(64*mib, 200*mib)
		case c < 8:
			return r.between(200*mib, 420*mib)
		default:
			return pick(r, 20*mib, 64*mib, 200*mib) + pick(r, int64(-512), 0, 512)
		}
	}
	for range 2500 {
		i := r.intn(int64(len(s)))
		if s[i] < 0 {
			s.step(b, i, size, budget)
			continue
		}
		old := b.size[s[i]]
		s.step(b, i, nil, budget)
		if r.chance(1, 2) {
			near := max(mib, old+r.between(-40*mib, 40*mib))
			s.step(b, i, func() int64 { return near }, budget)
		}
	}
	s.clear(b)
}

// genRoundup: 2000 steps over 10 slots with at most 5 GiB live; 70% of sizes spread
// from 1 MiB to 1.5 GiB, 30% within 4 KiB of a power of two from 1 MiB to 1 GiB.
func genRoundup(b *builder) {
	r := b.r
	s := newSlots(10)
	size := func() int64 {
		if r.chance(3, 10) {
			return int64(1)<<r.between(20, 30) + r.between(-4*kib, 4*kib)
		}
		return r.logSize(mib, 1536*mib)
	}
	for range 2000 {
		s.step(b, r.intn(int64(len(s))), size, 5*gib)
	}
	s.clear(b)
}

// noBudget is a live-bytes budget no trace reaches.
const noBudget = int64(1) << 62

// step frees slot i if it is live; otherwise it fills it with an alloc of size() when
// that keeps the builder's live bytes within budget, and leaves it empty when not.
func (s slots) step(b *builder, i int64, size func() int64, budget int64) {
	if s[i] >= 0 {
		b.free(s[i])
		s[i] = -1
		return
	}
	if n := size(); b.live+n <= budget {
		s[i] = b.alloc(n)
	}
}
