package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refLayerNorm is LayerNorm's forward in float64.
func refLayerNorm(x, w, b []float64, rows, n int, eps float64) []float64 {
	y := make([]float64, len(x))
	for i := range rows {
		row := x[i*n : (i+1)*n]
		mu, v := 0.0, 0.0
		for _, e := range row {
			mu += e
		}
		mu /= float64(n)
		for _, e := range row {
			v += (e - mu) * (e - mu)
		}
		v /= float64(n)
		for j, e := range row {
			h := (e - mu) / math.Sqrt(v+eps)
			if w != nil {
				h *= w[j]
			}
			if b != nil {
				h += b[j]
			}
			y[i*n+j] = h
		}
	}
	return y
}

func dot64(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func TestLayerNorm(t *testing.T) { bothTypes(t, testLayerNorm[float32], testLayerNorm[float64]) }

func testLayerNorm[T float](t *testing.T) {
	r := rand.New(rand.NewPCG(70, 71))
	const eps = 1e-5
	for _, s := range [][2]int{{1, 1}, {3, 8}, {5, 37}, {2, 300}} {
		rows, n := s[0], s[1]
		for _, affine := range []bool{false, true} {
			x := randFloats[T](r, rows*n, 2)
			var w, b []T
			var w64, b64 []float64
			if affine {
				w, b = randFloats[T](r, n, 1), randFloats[T](r, n, 1)
				w64, b64 = toF64(w), toF64(b)
			}
			y := make([]T, rows*n)
			mean := make([]T, rows)
			rstd := make([]T, rows)
			LayerNorm(y, mean, rstd, x, w, b, rows, n, eps)
			want := refLayerNorm(toF64(x), w64, b64, rows, n, eps)
			for i := range y {
				require.InDelta(t, want[i], y[i], tl[T](1e-4, 1e-12)*(1+math.Abs(want[i])), "%v affine=%v at %d", s, affine, i)
			}

			// Gradients of L = Σ g·y against central differences of the float64 forward.
			g := randFloats[T](r, rows*n, 1)
			g64 := toF64(g)
			dx := make([]T, rows*n)
			var dw, db []T
			if affine {
				dw, db = make([]T, n), make([]T, n)
			}
			LayerNormBackward(dx, dw, db, g, x, mean, rstd, w, rows, n)
			numX := numGrad(toF64(x), func(xs []float64) float64 { return dot64(g64, refLayerNorm(xs, w64, b64, rows, n, eps)) })
			for i := range dx {
				require.InDelta(t, numX[i], dx[i], tl[T](2e-3, 1e-6)*(1+math.Abs(numX[i])), "%v dx at %d", s, i)
			}
			if affine {
				numW := numGrad(w64, func(ws []float64) float64 { return dot64(g64, refLayerNorm(toF64(x), ws, b64, rows, n, eps)) })
				numB := numGrad(b64, func(bs []float64) float64 { return dot64(g64, refLayerNorm(toF64(x), w64, bs, rows, n, eps)) })
				for j := range n {
					require.InDelta(t, numW[j], dw[j], tl[T](2e-3, 1e-6)*(1+math.Abs(numW[j])), "dw at %d", j)
					require.InDelta(t, numB[j], db[j], tl[T](2e-3, 1e-6)*(1+math.Abs(numB[j])), "db at %d", j)
				}
			}
			// dx in place over g gives the same result.
			LayerNormBackward(g, nil, nil, g, x, mean, rstd, w, rows, n)
			assert.Equal(t, dx, g)
		}
	}
}
