package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func randFloats[T float](r *rand.Rand, n int, scale float64) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = T(r.NormFloat64() * scale)
	}
	return s
}

// refSoftmax computes softmax or log_softmax along the middle axis in float64.
func refSoftmax[T float](x []T, outer, n, inner int, log bool) []float64 {
	out := make([]float64, len(x))
	for o := range outer {
		for j := range inner {
			at := func(p int) int { return o*n*inner + p*inner + j }
			mx := math.Inf(-1)
			for p := range n {
				mx = math.Max(mx, float64(x[at(p)]))
			}
			s := 0.0
			for p := range n {
				s += math.Exp(float64(x[at(p)]) - mx)
			}
			for p := range n {
				v := float64(x[at(p)]) - mx
				if log {
					out[at(p)] = v - math.Log(s)
				} else {
					out[at(p)] = math.Exp(v) / s
				}
			}
		}
	}
	return out
}

func TestSoftmaxAgainstReference(t *testing.T) {
	bothTypes(t, testSoftmaxAgainstReference[float32], testSoftmaxAgainstReference[float64])
}

func testSoftmaxAgainstReference[T float](t *testing.T) {
	r := rand.New(rand.NewPCG(50, 51))
	shapes := [][3]int{{1, 1, 1}, {3, 7, 1}, {2, 5, 3}, {4, 1, 9}, {2, 300, 1}, {3, 4, 300}, {1, 2000, 20}}
	for _, s := range shapes {
		outer, n, inner := s[0], s[1], s[2]
		x := randFloats[T](r, outer*n*inner, 3)
		for _, log := range []bool{false, true} {
			y := make([]T, len(x))
			if log {
				LogSoftmax(y, x, outer, n, inner)
			} else {
				Softmax(y, x, outer, n, inner)
			}
			want := refSoftmax(x, outer, n, inner, log)
			for i := range y {
				require.InDelta(t, want[i], y[i], tl[T](2e-6, 1e-14)*(1+math.Abs(want[i])), "log=%v %v at %d", log, s, i)
			}
			// Backward against the closed forms in float64.
			g := randFloats[T](r, len(x), 1)
			dx := make([]T, len(x))
			if log {
				LogSoftmaxBackward(dx, g, y, outer, n, inner)
			} else {
				SoftmaxBackward(dx, g, y, outer, n, inner)
			}
			for o := range outer {
				for j := range inner {
					at := func(p int) int { return o*n*inner + p*inner + j }
					dot := 0.0
					for p := range n {
						if log {
							dot += float64(g[at(p)])
						} else {
							dot += float64(g[at(p)]) * want[at(p)]
						}
					}
					for p := range n {
						var w float64
						if log {
							w = float64(g[at(p)]) - math.Exp(want[at(p)])*dot
						} else {
							w = want[at(p)] * (float64(g[at(p)]) - dot)
						}
						require.InDelta(t, w, dx[at(p)], tl[T](1e-5, 1e-13)*(1+math.Abs(w)), "backward log=%v %v", log, s)
					}
				}
			}
		}
	}
}

func TestSoftmaxInPlaceAndEdges(t *testing.T) {
	inf := float32(math.Inf(1))
	x := []float32{1000, 1000, -inf, -inf, -inf, -inf, 1, 2, 3}
	Softmax(x, x, 3, 3, 1)
	assert.Equal(t, []float32{0.5, 0.5, 0}, x[:3], "large values do not overflow")
	for _, v := range x[3:6] {
		assert.True(t, math.IsNaN(float64(v)), "an all -Inf row has no softmax: NaN as 0/0")
	}
	assert.InDelta(t, 1, x[6]+x[7]+x[8], 1e-6)
	assert.Panics(t, func() { Softmax(x[:8], x, 3, 3, 1) })
}
