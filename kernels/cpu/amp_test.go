package cpu

import (
	"math"
	"testing"

	"github.com/subletml/sublet/kernels"

	"github.com/stretchr/testify/assert"

	"github.com/subletml/sublet/dtype"
)

func TestNonFiniteAndUnscale(t *testing.T) {
	n := 3*grain + 5 // several goroutines
	for _, bad := range []float32{0, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())} {
		for _, at := range []int{0, n / 2, n - 1} {
			g := make([]float32, n)
			for i := range g {
				g[i] = float32(i % 7)
			}
			if bad != 0 {
				g[at] = bad
			}
			orig := append([]float32(nil), g...)
			o := F32(g, kernels.Contiguous(n))
			assert.Equal(t, bad != 0, NonFinite(o), "%v at %d", bad, at)
			assert.Equal(t, bad != 0, Unscale(o, 0.5), "found-inf for %v at %d", bad, at)
			for i := range g {
				if bad == 0 || i != at {
					assert.Equal(t, orig[i]*0.5, g[i])
				}
			}
		}
	}
	h := []uint16{dtype.F32ToF16(1), dtype.F32ToF16(float32(math.Inf(1)))}
	assert.True(t, NonFinite(F16(h, kernels.Contiguous(2))))
	assert.False(t, NonFinite(F16(h[:1], kernels.Contiguous(1))))
	// A strided view sees only its own elements.
	assert.False(t, NonFinite(F16(h, kernels.Layout{Shape: []int{1}, Strides: []int{2}})))
	assert.True(t, Unscale(F16(h, kernels.Contiguous(2)), 4))
	assert.Equal(t, float32(4), dtype.F16ToF32(h[0]))
}
