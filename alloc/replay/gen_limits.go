package replay

// Generators about limits: fragmentation that costs memory, a memory fraction, and the
// device's real capacity.

// OOMBudget is the allowed bytes the oom_fraction kind is made for: about 2 GiB, which
// is a memory fraction of 0.0143 on an H200 (150109880320 bytes total).
const OOMBudget = 2 * gib

// genOOMFraction: persistent blocks of a quarter of OOMBudget, then 60 steps that each
// grow the live set by a quarter to all of OOMBudget (so up to 1.25 of it) with sizes
// from 512 B to 256 MiB, freeing a fifth of them early, then freeing the rest shuffled;
// the cache is emptied every 15 steps. Under the fraction, steps above the budget end
// in OOM and steps after a differently-shaped one need release-and-retry.
func genOOMFraction(b *builder) {
	r := b.r
	var base []int64
	for b.live < OOMBudget/4 {
		base = append(base, b.alloc(r.logSize(64*kib, 128*mib)))
	}
	for step := range 60 {
		target := b.live + r.between(OOMBudget/4, OOMBudget)
		var got []int64
		for b.live < target {
			got = append(got, b.alloc(r.logSize(512, 256*mib)))
			if len(got) > 1 && r.chance(1, 5) {
				j := r.intn(int64(len(got)))
				b.free(got[j])
				got = append(got[:j], got[j+1:]...)
			}
		}
		b.freeShuffled(got)
		if step%15 == 14 {
			b.emptyCache()
		}
	}
	b.freeShuffled(base)
}

// genOverCapacity: two rounds of 1-4 GiB blocks on an H200 (about 139 GiB free): fill to
// 100 GiB, free six (cached whole segments), fill to 150 GiB (a retry releases the
// cache, then real OOMs), free half, allocate four more, free the rest. The first round
// leaves its blocks cached for the second; the trace ends with empty_cache.
func genOverCapacity(b *builder) {
	r := b.r
	size := func() int64 { return r.between(gib, 4*gib) }
	for range 2 {
		var live []int64
		fill := func(to int64) {
			for b.live < to {
				live = append(live, b.alloc(size()))
			}
		}
		fill(100 * gib)
		shuffle(r, live)
		b.free(live[:6]...)
		live = live[6:]
		fill(150 * gib)
		shuffle(r, live)
		half := len(live) / 2
		b.free(live[:half]...)
		live = live[half:]
		for range 4 {
			live = append(live, b.alloc(size()))
		}
		b.freeShuffled(live)
	}
	b.emptyCache()
}

// genBlog: 16 rounds of the fragmentation pattern from the PyTorch blog: n blocks of a
// bytes, all freed, then n/2 of 2a (or the reverse order), all freed. The first two
// rounds are the blog's own 8x16 MiB / 4x32 MiB; later ones draw a and n, shave up to
// 4 KiB off a, and every other round keeps one block of the first wave live (pinning
// its segment) until the round ends. Rounds end with empty_cache.
func genBlog(b *builder) {
	r := b.r
	for round := range 16 {
		n, a := int64(8), 16*mib
		if round >= 2 {
			n = pick(r, int64(4), 6, 8, 12)
			a = pick(r, 12*mib, 16*mib, 24*mib, 40*mib) - r.between(0, 4*kib)
		}
		first, second := [2]int64{n, a}, [2]int64{n / 2, 2 * a}
		if round%4 >= 2 {
			first, second = second, first
		}
		var ids []int64
		for range first[0] {
			ids = append(ids, b.alloc(first[1]))
		}
		pin := int64(-1)
		if round%2 == 1 {
			pin, ids = ids[0], ids[1:]
		}
		b.free(ids...)
		ids = ids[:0]
		for range second[0] {
			ids = append(ids, b.alloc(second[1]))
		}
		b.free(ids...)
		if pin >= 0 {
			b.free(pin)
		}
		b.emptyCache()
	}
}
