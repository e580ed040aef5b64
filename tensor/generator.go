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

// fillUniform writes uniform values in [0, 1) into dst.
func (g *Generator) fillUniform(dst []float32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range dst {
		dst[i] = g.r.Float32()
	}
}

// fillNormal writes standard normal values into dst.
func (g *Generator) fillNormal(dst []float32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range dst {
		dst[i] = float32(g.r.NormFloat64())
	}
}
