package tensor

import (
	"fmt"
	"math/rand/v2"
	"sync"
)

// Generator is an explicit source of random numbers (a PCG), the scope mode that Rand,
// Randn and Dropout draw from. Its state can be saved and restored, so a recomputation
// (checkpointing) redraws the same dropout masks. It is safe for concurrent use; draws
// from two goroutines interleave in an unspecified order, so give each its own
// generator for reproducible runs. Dropout draws one 64-bit key per call on every
// device; Rand, Randn, FillUniform and FillNormal draw a value per element, and
// nothing on a device that keeps no data (meta).
type Generator struct {
	mu  sync.Mutex
	src rand.PCG   // guarded by mu
	r   *rand.Rand // over src; guarded by mu
}

// GeneratorState is a saved Generator state.
type GeneratorState struct {
	b []byte
}

// NewGenerator returns a generator seeded with seed.
func NewGenerator(seed uint64) *Generator {
	g := &Generator{}
	g.src.Seed(seed, seed^0x9e3779b97f4a7c15)
	g.r = rand.New(&g.src)
	return g
}

// State returns the generator's current state.
func (g *Generator) State() GeneratorState {
	g.mu.Lock()
	defer g.mu.Unlock()
	b, err := g.src.MarshalBinary()
	if err != nil {
		panic(fmt.Sprintf("tensor: internal error: saving a PCG state: %v", err))
	}
	return GeneratorState{b}
}

// Restore sets the generator back to a state State returned: it then draws the same
// numbers it drew after that call.
func (g *Generator) Restore(st GeneratorState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.src.UnmarshalBinary(st.b); err != nil {
		panic(&Error{Op: "Generator.Restore", Msg: "not a state returned by Generator.State", Err: err})
	}
}

// Uint64 returns 64 random bits.
func (g *Generator) Uint64() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.src.Uint64()
}

// fill writes shift + v·scale into dst for values v drawn from g in dst's precision
// (float32 draws for float32, the numbers F32 tensors always drew; float64 draws for
// float64): uniform in [0, 1), or standard normal when normal is set.
func fill[T float32 | float64](g *Generator, dst []T, normal bool, shift, scale float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	draw(g, dst, normal, shift, scale)
}

// draw is fill for a caller that holds g.mu: values drawn across several calls under
// one hold are those one fill of them all would give.
func draw[T float32 | float64](g *Generator, dst []T, normal bool, shift, scale float64) {
	_, wide := any(dst).([]float64)
	for i := range dst {
		var v float64
		switch {
		case normal && wide:
			v = g.r.NormFloat64()
		case normal:
			v = float64(float32(g.r.NormFloat64()))
		case wide:
			v = g.r.Float64()
		default:
			v = float64(g.r.Float32())
		}
		dst[i] = T(shift + v*scale)
	}
}
