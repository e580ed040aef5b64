package replay

import (
	"fmt"
	"strings"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// generator is one kind of trace: a deterministic function of a seed.
type generator struct {
	name string
	doc  string
	gen  func(b *builder)
}

// generators is the fixed table of kinds, in the order Kinds lists them.
var generators = []generator{
	{"train", "MLP training loop: persistent params, forward activations freed by backward, grads freed by zero_grad, Adam state from step 1, temporaries, periodic no_grad eval", genTrain},
	{"seqlen", "transformer training (fp16) with the sequence length drawn anew every step: attention scores grow with its square, so block sizes never repeat exactly", genSeqlen},
	{"random", "random lifetimes over 192 slots: mostly small, some medium and large unaligned sizes, with burst frees", genRandom},
	{"growing", "growing buffers (KV-cache style realloc: alloc bigger, free old) next to fixed workspaces, restarted three times", genGrowing},
	{"small_churn", "small-pool churn (<= 1 MiB, some < 512 B) over 64 slots driven by the bench's LCG, with long-lived pins that keep 2 MiB segments split", genSmallChurn},
	{"oversize", "blocks around and above max_split_size (8 MiB .. 420 MiB in clusters), frees followed by slightly larger or smaller requests", genOversize},
	{"empty_cache", "epochs of training-like steps with empty_cache every few steps, while persistent and pinned blocks keep some segments live", genEmptyCache},
	{"oom_fraction", "made for a memory fraction of about 2 GiB (0.0143 of an H200): steps whose live set ranges from a quarter to 1.25 of that, so runs hit release-and-retry and OOM", genOOMFraction},
	{"blog", "the PyTorch blog's fragmentation pattern: n blocks of a then n/2 of 2a and the reverse, with and without pins, with empty_cache between rounds", genBlog},
	{"over_capacity", "1-4 GiB blocks past the H200's ~140 GiB: cached blocks force release-and-retry, then real OOMs, then recovery", genOverCapacity},
	{"roundup", "sizes spread from 1 MiB to 1.5 GiB and around powers of two, few live at a time: for roundup_power2_divisions", genRoundup},
}

// Kinds lists the trace generators' names.
func Kinds() []string {
	names := make([]string, len(generators))
	for i, g := range generators {
		names[i] = g.name
	}
	return names
}

// Describe returns the one-line description of a kind, or "" for an unknown one.
func Describe(kind string) string {
	for _, g := range generators {
		if g.name == kind {
			return g.doc
		}
	}
	return ""
}

// Generate returns the trace of a kind for a seed. The same (kind, seed) always gives
// the same events.
func Generate(kind string, seed int64) ([]Event, error) {
	for _, g := range generators {
		if g.name == kind {
			b := &builder{r: newRNG(seed)}
			g.gen(b)
			if err := Validate(b.events); err != nil {
				return nil, fmt.Errorf("generate %s seed %d: generator broke the trace rules: %w", kind, seed, err)
			}
			return b.events, nil
		}
	}
	return nil, fmt.Errorf("generate: unknown trace kind %q (known: %s)", kind, strings.Join(Kinds(), ", "))
}

// builder appends events with fresh ids and tracks the live bytes.
type builder struct {
	r      *rng
	events []Event
	nextID int64
	size   map[int64]int64 // live id -> size
	live   int64           // sum of live sizes
}

func (b *builder) alloc(size int64) int64 {
	if b.size == nil {
		b.size = make(map[int64]int64)
	}
	id := b.nextID
	b.nextID++
	b.events = append(b.events, Event{Op: OpAlloc, ID: id, Size: size})
	b.size[id] = size
	b.live += size
	return id
}

// free frees ids in the order given.
func (b *builder) free(ids ...int64) {
	for _, id := range ids {
		b.events = append(b.events, Event{Op: OpFree, ID: id})
		b.live -= b.size[id]
		delete(b.size, id)
	}
}

// freeReverse frees ids last to first, as a stack unwinds.
func (b *builder) freeReverse(ids []int64) {
	for i := len(ids) - 1; i >= 0; i-- {
		b.free(ids[i])
	}
}

// freeShuffled frees ids in a random order.
func (b *builder) freeShuffled(ids []int64) {
	ids = append([]int64(nil), ids...)
	shuffle(b.r, ids)
	b.free(ids...)
}

func (b *builder) emptyCache() { b.events = append(b.events, Event{Op: OpEmptyCache}) }

// slots is a fixed set of places that each hold one live id or none (-1).
type slots []int64

func newSlots(n int) slots {
	s := make(slots, n)
	for i := range s {
		s[i] = -1
	}
	return s
}

// clear frees every live slot, lowest index first.
func (s slots) clear(b *builder) {
	for i, id := range s {
		if id >= 0 {
			b.free(id)
			s[i] = -1
		}
	}
}
