package replay

// rng is SplitMix64 with integer-only helpers. Generators use it instead of math/rand so
// that a trace depends on nothing but (kind, seed): no library's stream can change under
// it, and no floating point (which Go may fuse differently per architecture) is involved.
type rng struct {
	state uint64 // owned by one generator call
}

func newRNG(seed int64) *rng { return &rng{state: uint64(seed)} }

func (r *rng) uint64() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn returns a value in [0, n); n > 0. The modulo bias (< n/2^64) is irrelevant here.
func (r *rng) intn(n int64) int64 { return int64(r.uint64() % uint64(n)) }

// between returns a value in [lo, hi].
func (r *rng) between(lo, hi int64) int64 { return lo + r.intn(hi-lo+1) }

// chance reports true with probability num/den.
func (r *rng) chance(num, den int64) bool { return r.intn(den) < num }

// logSize returns a size spread evenly over the binary orders of magnitude in [lo, hi)
// (lo a power of two): first an octave, then a point inside it.
func (r *rng) logSize(lo, hi int64) int64 {
	for {
		octaves := int64(0)
		for lo<<octaves < hi {
			octaves++
		}
		base := lo << r.intn(octaves)
		if s := base + r.intn(base); s < hi {
			return s
		}
	}
}

// pick returns one element of xs.
func pick[T any](r *rng, xs ...T) T { return xs[r.intn(int64(len(xs)))] }

// shuffle permutes xs in place (Fisher-Yates).
func shuffle[T any](r *rng, xs []T) {
	for i := len(xs) - 1; i > 0; i-- {
		j := r.intn(int64(i + 1))
		xs[i], xs[j] = xs[j], xs[i]
	}
}
