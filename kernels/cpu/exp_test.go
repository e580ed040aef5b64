package cpu

import (
	"math"
	"testing"

	"github.com/subletml/sublet/kernels"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ulpErr is |got - want| in units of the float32 spacing at want.
func ulpErr(got float32, want float64) float64 {
	w := float32(want)
	if math.IsInf(float64(w), 0) {
		if got == w {
			return 0
		}
		return math.Inf(1)
	}
	next := math.Nextafter32(w, float32(math.Inf(1)))
	ulp := float64(next) - float64(w)
	if math.IsInf(float64(next), 0) {
		ulp = float64(w) - float64(math.Nextafter32(w, 0))
	}
	return math.Abs(float64(got)-want) / ulp
}

func TestExpAccuracy(t *testing.T) {
	impls := map[string]func(dst, x []float32){
		"scalar": func(dst, x []float32) {
			for i, v := range x {
				dst[i] = expScalar(v)
			}
		},
		"best": expTo[float32],
	}
	// Every 16411th float32 in the range where e^x is neither 0 nor +Inf, and the
	// boundaries themselves.
	var xs []float32
	for b := uint64(0); b < 1<<32; b += 16411 {
		x := math.Float32frombits(uint32(b))
		if x > -105 && x < 89 {
			xs = append(xs, x)
		}
	}
	xs = append(xs, 88.72283, 88.72284, -87.33654, -103.27893, -103.97208, 0, float32(math.Copysign(0, -1)))
	for name, exp := range impls {
		got := make([]float32, len(xs))
		exp(got, xs)
		worst := 0.0
		for i, x := range xs {
			want := math.Exp(float64(x))
			e := ulpErr(got[i], want)
			require.LessOrEqual(t, e, 1.5, "%s: exp(%v) = %v, want %v", name, x, got[i], want)
			worst = max(worst, e)
		}
		t.Logf("%s: worst error %.3f ulp over %d inputs", name, worst, len(xs))
	}
}

func TestExpSpecialValues(t *testing.T) {
	inf := float32(math.Inf(1))
	x := []float32{inf, -inf, float32(math.NaN()), 100, -200, 0, 1, -1, 89, -104.5, 88.8}
	for _, n := range []int{len(x), 16 + 3} { // a tail alone, and a vector body with a tail
		in := make([]float32, n)
		copy(in, x)
		out := make([]float32, n)
		expTo(out, in)
		assert.Equal(t, inf, out[0])
		assert.Equal(t, float32(0), out[1])
		assert.True(t, math.IsNaN(float64(out[2])))
		assert.Equal(t, inf, out[3])
		assert.Equal(t, float32(0), out[4])
		assert.Equal(t, float32(1), out[5])
		assert.InDelta(t, math.E, out[6], 1e-6)
		assert.InDelta(t, 1/math.E, out[7], 1e-7)
		assert.Equal(t, inf, out[8])
		assert.Equal(t, float32(0), out[9])
		assert.Equal(t, inf, out[10])
		// The same input at any position gives the same bits, body or tail.
		same := make([]float32, 37)
		for i := range same {
			same[i] = 0.3
		}
		expTo(same, same)
		for _, v := range same {
			require.Equal(t, same[0], v)
		}
	}
}

func TestTanhAccuracy(t *testing.T) {
	var xs []float32
	for b := uint64(0); b < 1<<32; b += 16411 {
		if x := math.Float32frombits(uint32(b)); x == x {
			xs = append(xs, x)
		}
	}
	inf := float32(math.Inf(1))
	xs = append(xs, 0.625, -0.625, math.Nextafter32(0.625, 0), inf, -inf, float32(math.Copysign(0, -1)))
	got := make([]float32, len(xs))
	Unary(kernels.Tanh, F32(got, kernels.Contiguous(len(xs))), F32(xs, kernels.Contiguous(len(xs))))
	for i, x := range xs {
		require.LessOrEqual(t, ulpErr(got[i], math.Tanh(float64(x))), 2.0, "tanh(%v) = %v", x, got[i])
	}
	n := len(xs)
	assert.Equal(t, []float32{1, -1}, got[n-3:n-1])
	assert.True(t, math.Signbit(float64(got[n-1])), "tanh(-0) is -0")
	nan := []float32{float32(math.NaN())}
	Unary(kernels.Tanh, F32(nan, kernels.Contiguous(1)), F32(nan, kernels.Contiguous(1)))
	assert.True(t, math.IsNaN(float64(nan[0])))
}
