package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
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

// The vector loops give every element the bits the element-by-element loop gives it,
// for every combination of the hyper-parameters' flags, every width this CPU has, any
// alignment and length; and SGDStep and AdamStep over many elements (in parallel
// pieces) give the bits of one piece on one thread.
func TestOptimVectorLoopsMatchScalar(t *testing.T) {
	bothTypes(t, testOptimVectors[float32], testOptimVectors[float64])
}

func testOptimVectors[T float](t *testing.T) {
	vecs := optimVecs32
	if !is32[T]() {
		vecs = optimVecs64
	}
	if len(vecs) == 0 {
		t.Skip("no vector loops on this CPU")
	}
	r := rand.New(rand.NewPCG(104, 105))
	same := func(want, got []T, what string) {
		t.Helper()
		for i := range want {
			if math.Float64bits(float64(want[i])) != math.Float64bits(float64(got[i])) {
				t.Fatalf("%s at %d: %v, want %v", what, i, got[i], want[i])
			}
		}
	}
	const n = 203 // not a multiple of any width
	data := func() []T {
		s := randFloats[T](r, n+1, 1)
		s[7], s[8] = 0, T(math.Copysign(0, -1))
		return s[1:] // off the allocation's alignment
	}
	for flags := range sgdWD | sgdMomentum | sgdFirst | sgdNesterov + 1 {
		k := sgdConsts[T]{flags: flags, lr: 0.05, mom: 0.9, damp1: 1 - 0.1, wd: 0.01}
		p, g, buf := data(), data(), data()
		for _, v := range vecs {
			wantP, wantB := slices.Clone(p), slices.Clone(buf)
			k.run(optimVec{}, wantP, g, wantB)
			gotP, gotB := slices.Clone(p), slices.Clone(buf)
			k.run(v, gotP, g, gotB)
			same(wantP, gotP, fmt.Sprintf("sgd flags %b width %d p", flags, v.width))
			same(wantB, gotB, fmt.Sprintf("sgd flags %b width %d buf", flags, v.width))
		}
	}
	for _, flags := range []int{0, adamWD} {
		k := adamConsts[T]{flags: flags, b1: 0.9, omb1: 0.1, b2: 0.999, omb2: T(1 - 0.999), decay: 0.99, stepSize: 1e-3, rbc2: 3.7, eps: 1e-8, wd: 0.01}
		p, g, m, v := data(), data(), data(), data()
		for i := range v {
			v[i] *= v[i] // a second moment is not negative
		}
		for _, vec := range vecs {
			want := [][]T{slices.Clone(p), slices.Clone(m), slices.Clone(v)}
			k.run(optimVec{}, want[0], g, want[1], want[2])
			got := [][]T{slices.Clone(p), slices.Clone(m), slices.Clone(v)}
			k.run(vec, got[0], g, got[1], got[2])
			for i, what := range []string{"p", "m", "v"} {
				same(want[i], got[i], fmt.Sprintf("adam flags %b width %d %s", flags, vec.width, what))
			}
		}
	}

	big := 3*grain + 5 // several parallel pieces
	p, g, buf := randFloats[T](r, big, 1), randFloats[T](r, big, 1), randFloats[T](r, big, 1)
	c := kernels.SGD{LR: 0.1, Momentum: 0.9, Dampening: 0.2, WeightDecay: 0.01, Nesterov: true}
	k := sgdConsts[T]{flags: sgdWD | sgdMomentum | sgdNesterov, lr: T(c.LR), mom: T(c.Momentum), damp1: 1 - T(c.Dampening), wd: T(c.WeightDecay)}
	wantP, wantB := slices.Clone(p), slices.Clone(buf)
	k.run(optimVec{}, wantP, g, wantB)
	SGDStep(c, p, g, buf, false)
	same(wantP, p, "SGDStep p")
	same(wantB, buf, "SGDStep buf")
	m, v := randFloats[T](r, big, 1), randFloats[T](r, big, 1)
	for i := range v {
		v[i] *= v[i]
	}
	a := kernels.Adam{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1}
	want := [][]T{slices.Clone(p), slices.Clone(m), slices.Clone(v)}
	prev := runtime.GOMAXPROCS(1)
	AdamStep(a, 3, want[0], g, want[1], want[2])
	runtime.GOMAXPROCS(prev)
	AdamStep(a, 3, p, g, m, v)
	for i, got := range [][]T{p, m, v} {
		same(want[i], got, "AdamStep on one thread and on all")
	}
}

// A step small enough to stay on the calling goroutine allocates nothing: no closure
// over its operands, and its constants, which the vector loops read through a
// pointer, come from a pool.
func TestSmallOptimizerStepsAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops the constants at random under the race detector")
	}
	p, g, m, v := make([]float32, 100), make([]float32, 100), make([]float32, 100), make([]float32, 100)
	sgd := kernels.SGD{LR: 0.1, Momentum: 0.9}
	require.Zero(t, testing.AllocsPerRun(100, func() { SGDStep(sgd, p, g, m, false) }), "SGDStep")
	adam := kernels.Adam{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	require.Zero(t, testing.AllocsPerRun(100, func() { AdamStep(adam, 1, p, g, m, v) }), "AdamStep")
}
