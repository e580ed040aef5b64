package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/kernels"
)

// refSGD is torch.optim.SGD's update in float64.
func refSGD(c kernels.SGD, p, g, buf []float64, first bool) {
	for i := range p {
		d := g[i] + float64(c.WeightDecay)*p[i]
		if c.Momentum != 0 {
			if first {
				buf[i] = d
			} else {
				buf[i] = float64(c.Momentum)*buf[i] + (1-float64(c.Dampening))*d
			}
			if c.Nesterov {
				d += float64(c.Momentum) * buf[i]
			} else {
				d = buf[i]
			}
		}
		p[i] -= float64(c.LR) * d
	}
}

// refAdam is torch.optim.Adam / AdamW's update in float64.
func refAdam(c kernels.Adam, step int, p, g, m, v []float64) {
	for i := range p {
		d := g[i]
		if c.Decoupled {
			p[i] *= 1 - float64(c.LR)*float64(c.WeightDecay)
		} else {
			d += float64(c.WeightDecay) * p[i]
		}
		m[i] = float64(c.Beta1)*m[i] + (1-float64(c.Beta1))*d
		v[i] = float64(c.Beta2)*v[i] + (1-float64(c.Beta2))*d*d
		bc1 := 1 - math.Pow(float64(c.Beta1), float64(step))
		bc2 := 1 - math.Pow(float64(c.Beta2), float64(step))
		p[i] -= float64(c.LR) / bc1 * m[i] / (math.Sqrt(v[i])/math.Sqrt(bc2) + float64(c.Eps))
	}
}

func requireAllClose[T float](t *testing.T, want []float64, got []T, tol float64, msg string) {
	t.Helper()
	for i := range want {
		require.InDelta(t, want[i], got[i], tol*(1+math.Abs(want[i])), "%s at %d", msg, i)
	}
}

func TestSGD(t *testing.T) { bothTypes(t, testSGD[float32], testSGD[float64]) }

func testSGD[T float](t *testing.T) {
	r := rand.New(rand.NewPCG(100, 101))
	for _, c := range []kernels.SGD{
		{LR: 0.1},
		{LR: 0.1, WeightDecay: 0.01},
		{LR: 0.05, Momentum: 0.9},
		{LR: 0.05, Momentum: 0.9, Dampening: 0.1, WeightDecay: 0.001},
		{LR: 0.05, Momentum: 0.9, Nesterov: true},
	} {
		n := 50
		p := randFloats[T](r, n, 1)
		buf := make([]T, n)
		p64, buf64 := toF64(p), make([]float64, n)
		for step := range 5 {
			g := randFloats[T](r, n, 1)
			SGDStep(c, p, g, buf, step == 0)
			refSGD(c, p64, toF64(g), buf64, step == 0)
		}
		requireAllClose(t, p64, p, tl[T](1e-5, 1e-14), "sgd")
	}
}

func TestAdam(t *testing.T) { bothTypes(t, testAdam[float32], testAdam[float64]) }

func testAdam[T float](t *testing.T) {
	r := rand.New(rand.NewPCG(102, 103))
	for _, c := range []kernels.Adam{
		{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
		{LR: 1e-2, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, WeightDecay: 0.1},
		{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, Decoupled: true},
	} {
		n := 50
		p := randFloats[T](r, n, 1)
		m, v := make([]T, n), make([]T, n)
		p64, m64, v64 := toF64(p), make([]float64, n), make([]float64, n)
		for step := 1; step <= 6; step++ {
			g := randFloats[T](r, n, 1)
			AdamStep(c, step, p, g, m, v)
			refAdam(c, step, p64, toF64(g), m64, v64)
		}
		requireAllClose(t, p64, p, tl[T](1e-5, 1e-13), "adam")
		requireAllClose(t, m64, m, tl[T](1e-5, 1e-13), "adam m")
		requireAllClose(t, v64, v, tl[T](1e-5, 1e-13), "adam v")
	}
}
