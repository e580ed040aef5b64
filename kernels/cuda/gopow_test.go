package cuda

import (
	"math"
	"math/rand/v2"
	"testing"
)

// goPow is src/optim.cu's go_pow written again in Go, line for line: the device's bias
// corrections for the capturable Adam. The GPU test of AdamMultiCapturable proves the
// kernel; this proves, everywhere, that its arithmetic is math.Pow's.
func goPow(x float64, n int64) float64 {
	const expMask = int64(0x7ff) << 52
	if n == 1 {
		return x
	}
	if x == 0 {
		return 0
	}
	shift := 0
	if int64(math.Float64bits(x))&expMask == 0 {
		x *= 4503599627370496.0
		shift = 52
	}
	xb := int64(math.Float64bits(x))
	xe := int((xb&expMask)>>52) - 1022 - shift
	x1 := math.Float64frombits(uint64((xb &^ expMask) | 1022<<52))
	a1, ae := 1.0, 0
	for i := n; i != 0; i >>= 1 {
		if xe < -(1<<12) || 1<<12 < xe {
			ae += xe
			break
		}
		if i&1 == 1 {
			a1 *= x1
			ae += xe
		}
		x1 *= x1
		xe <<= 1
		if x1 < .5 {
			x1 += x1
			xe--
		}
	}
	ab := int64(math.Float64bits(a1))
	e := (ab&expMask)>>52 + int64(ae)
	if e >= 1 {
		return math.Float64frombits(uint64((ab &^ expMask) | e<<52))
	}
	if e < -52 {
		return 0
	}
	return math.Float64frombits(uint64((ab&^expMask)|(e+53)<<52)) * 1.1102230246251565e-16
}

// TestGoPowIsMathPow: go_pow gives math.Pow's bits for Adam's betas (PyTorch's, extreme
// ones, a subnormal one, random ones) at every step up to 3000, at powers of two and at
// random steps up to 2^40, where the powers become subnormal and then 0.
func TestGoPowIsMathPow(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 18))
	betas := []float64{0, 0.5, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9999, 1 - 1e-12, 0.1, 1e-3, 1e-300, 5e-324, 2.5e-310}
	for range 40 {
		betas = append(betas, r.Float64())
	}
	steps := []int64{}
	for n := int64(1); n <= 3000; n++ {
		steps = append(steps, n)
	}
	for k := 12; k <= 40; k++ {
		steps = append(steps, 1<<k-1, 1<<k, 1<<k+1)
	}
	for range 300 {
		steps = append(steps, 1+r.Int64N(1<<40))
	}
	for _, b := range betas {
		for _, n := range steps {
			want, got := math.Pow(b, float64(n)), goPow(b, n)
			if math.Float64bits(want) != math.Float64bits(got) {
				t.Fatalf("%v^%d: go_pow %v (%#x), math.Pow %v (%#x)", b, n, got, math.Float64bits(got), want, math.Float64bits(want))
			}
		}
	}
}
