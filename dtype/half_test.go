package dtype

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refF16ToF64 decodes half bits from the definition of binary16.
func refF16ToF64(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	switch e {
	case 0:
		return sign * math.Ldexp(m, -24)
	case 0x1f:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1024+m, e-25)
}

// refBF16ToF64 decodes bfloat16 bits from the definition (8-bit exponent, 7-bit
// fraction).
func refBF16ToF64(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>7) & 0xff
	m := float64(h & 0x7f)
	switch e {
	case 0:
		return sign * math.Ldexp(m, -133)
	case 0xff:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(128+m, e-134)
}

type format struct {
	name    string
	toF32   func(uint16) float32
	fromF32 func(float32) uint16
	ref     func(uint16) float64
	maxBits uint16 // largest finite positive value
	infBits uint16
}

var formats = []format{
	{"F16", F16ToF32, F32ToF16, refF16ToF64, 0x7bff, 0x7c00},
	{"BF16", BF16ToF32, F32ToBF16, refBF16ToF64, 0x7f7f, 0x7f80},
}

func isNaN16(f format, h uint16) bool { return math.IsNaN(f.ref(h)) }

// TestDecodeExhaustive checks every one of the 65536 bit patterns decodes exactly and
// round-trips through float32 to the same bits (NaN to some NaN of the same sign).
func TestDecodeExhaustive(t *testing.T) {
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			for i := range 1 << 16 {
				h := uint16(i)
				got := f.toF32(h)
				want := f.ref(h)
				if math.IsNaN(want) {
					require.True(t, math.IsNaN(float64(got)), "%s %#04x decodes to %v", f.name, h, got)
					back := f.fromF32(got)
					require.True(t, isNaN16(f, back), "%s NaN %#04x came back as %#04x", f.name, h, back)
					require.Equal(t, h&0x8000, back&0x8000, "NaN sign")
					continue
				}
				require.Equal(t, want, float64(got), "%s %#04x", f.name, h)
				require.Equal(t, math.Signbit(want), math.Signbit(float64(got)), "%s sign of %#04x", f.name, h)
				require.Equal(t, h, f.fromF32(got), "%s round trip of %#04x", f.name, h)
			}
		})
	}
}

// TestRoundingTiesExhaustive checks every midpoint between two adjacent finite values
// (exact in float32) rounds to the one with an even last bit, and that one float32 ulp
// either side of the midpoint rounds to the nearer value.
func TestRoundingTiesExhaustive(t *testing.T) {
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			for _, sign := range []uint16{0, 0x8000} {
				for lo := uint16(0); lo < f.maxBits; lo++ {
					a, b := sign|lo, sign|(lo+1)
					mid := float32((f.ref(a) + f.ref(b)) / 2)
					require.Equal(t, (f.ref(a)+f.ref(b))/2, float64(mid), "midpoint must be exact in float32")
					even := a
					if a&1 == 1 {
						even = b
					}
					require.Equal(t, even, f.fromF32(mid), "%s tie between %#04x and %#04x", f.name, a, b)
					toward0 := math.Nextafter32(mid, 0)
					away := math.Nextafter32(mid, float32(math.Copysign(math.Inf(1), float64(mid))))
					require.Equal(t, a, f.fromF32(toward0), "%s below tie %#04x/%#04x", f.name, a, b)
					require.Equal(t, b, f.fromF32(away), "%s above tie %#04x/%#04x", f.name, a, b)
				}
			}
		})
	}
}

func TestF16Edges(t *testing.T) {
	cases := []struct {
		in   float32
		want uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{65504, 0x7bff},
		{65519.996, 0x7bff},
		{65520, 0x7c00}, // the tie above the max rounds to even, which is Inf
		{-65520, 0xfc00},
		{1e10, 0x7c00},
		{float32(math.Inf(1)), 0x7c00},
		{float32(math.Inf(-1)), 0xfc00},
		{float32(math.Ldexp(1, -24)), 0x0001},     // smallest subnormal
		{float32(math.Ldexp(1, -25)), 0x0000},     // half of it: tie to even zero
		{float32(math.Ldexp(1.5, -25)), 0x0001},   // above the tie
		{float32(math.Ldexp(3, -25)), 0x0002},     // tie between 1 and 2 goes to even 2
		{float32(math.Ldexp(1023, -24)), 0x03ff},  // largest subnormal
		{float32(math.Ldexp(1, -14)), 0x0400},     // smallest normal
		{float32(math.Ldexp(1, -30)), 0x0000},     // underflow
		{float32(-math.Ldexp(1, -30)), 0x8000},    // underflow keeps the sign
		{float32(math.Ldexp(2047, -25)), 0x0400},  // largest subnormal+half ulp rounds up into normals
		{1 + float32(math.Ldexp(1, -11)), 0x3c00}, // 1 + half ulp: tie to even 1
		{1 + float32(math.Ldexp(3, -11)), 0x3c02}, // 1 + 1.5 ulp: tie to even
		{float32(math.Ldexp(1, -149)), 0x0000},    // float32's smallest subnormal
		{float32(-math.Ldexp(1, -149)), 0x8000},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, F32ToF16(c.in), "F32ToF16(%v)", c.in)
	}
	assert.Equal(t, float32(65504), F16ToF32(0x7bff))
	assert.True(t, math.Signbit(float64(F16ToF32(0x8000))))
	for _, nan := range []uint32{0x7fc00000, 0x7f800001, 0xff800001, 0x7fbfffff, 0x7f802000} {
		h := F32ToF16(math.Float32frombits(nan))
		assert.True(t, isNaN16(formats[0], h), "NaN %#08x became %#04x", nan, h)
		assert.Equal(t, uint16(nan>>16)&0x8000, h&0x8000)
	}
}

func TestBF16Edges(t *testing.T) {
	maxF32 := float32(math.MaxFloat32)
	cases := []struct {
		in   float32
		want uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3f80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie, kept bit even: stays
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie, kept bit odd: rounds up
		{math.Float32frombits(0x3f808001), 0x3f81}, // above tie
		{math.Float32frombits(0x7f7f7fff), 0x7f7f}, // below the tie at the max
		{math.Float32frombits(0x7f7f8000), 0x7f80}, // tie at the max rounds to even: Inf
		{maxF32, 0x7f80},
		{float32(math.Inf(1)), 0x7f80},
		{float32(math.Inf(-1)), 0xff80},
		{math.Float32frombits(0x00000001), 0x0000}, // tiny subnormal rounds to zero
		{math.Float32frombits(0x00008000), 0x0000}, // tie between 0 and the smallest: even 0
		{math.Float32frombits(0x00018000), 0x0002}, // tie between 1 and 2: even 2
		{math.Float32frombits(0x80000001), 0x8000},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, F32ToBF16(c.in), "F32ToBF16(%#08x)", math.Float32bits(c.in))
	}
	// NaNs whose payload sits only in the low 16 bits must not turn into Inf.
	for _, nan := range []uint32{0x7f800001, 0xff800001, 0x7fc00000, 0x7f80ffff, 0x7fffffff} {
		h := F32ToBF16(math.Float32frombits(nan))
		assert.True(t, isNaN16(formats[1], h), "NaN %#08x became %#04x", nan, h)
		assert.Equal(t, uint16(nan>>16)&0x8000, h&0x8000)
	}
}

// refRound rounds x to the nearest value of format f by search over its bit patterns,
// ties to even, overflow to Inf: an independent check of the converters on random input.
func refRound(f format, x float32) uint16 {
	if math.IsNaN(float64(x)) {
		return 0
	}
	sign := uint16(0)
	v := float64(x)
	if math.Signbit(v) {
		sign, v = 0x8000, -v
	}
	if math.IsInf(v, 0) {
		return sign | f.infBits
	}
	lo, hi := uint16(0), f.infBits // f.ref is increasing on [0, infBits]
	for hi-lo > 1 {
		m := (lo + hi) / 2
		if f.ref(m) <= v {
			lo = m
		} else {
			hi = m
		}
	}
	// lo <= v < hi; pick the nearer, ties to even. Past the max, the "next" value is Inf
	// and the tie point is where the next finite value would have been halfway.
	dlo := v - f.ref(lo)
	dhi := f.ref(hi) - v
	if hi == f.infBits {
		ulp := f.ref(lo) - f.ref(lo-1)
		dhi = f.ref(lo) + ulp - v
	}
	switch {
	case dlo < dhi:
		return sign | lo
	case dhi < dlo:
		return sign | hi
	case lo&1 == 0:
		return sign | lo
	}
	return sign | hi
}

func TestRoundingRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, f := range formats {
		for range 200000 {
			x := math.Float32frombits(r.Uint32())
			if math.IsNaN(float64(x)) {
				continue
			}
			require.Equal(t, refRound(f, x), f.fromF32(x), "%s of %#08x (%v)", f.name, math.Float32bits(x), x)
		}
	}
}

func TestSliceConversions(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	src := make([]float32, 1000)
	for i := range src {
		src[i] = float32(r.NormFloat64() * 1000)
	}
	h := make([]uint16, len(src))
	back := make([]float32, len(src))

	F32sToF16s(h, src)
	F16sToF32s(back, h)
	for i, v := range src {
		require.Equal(t, F32ToF16(v), h[i])
		require.Equal(t, F16ToF32(h[i]), back[i])
	}
	F32sToBF16s(h, src)
	BF16sToF32s(back, h)
	for i, v := range src {
		require.Equal(t, F32ToBF16(v), h[i])
		require.Equal(t, BF16ToF32(h[i]), back[i])
	}
	assert.Panics(t, func() { F32sToF16s(h[:10], src) }, "a short dst is a caller bug")
}

// TestSliceConversionsMatchScalar checks the vector path (F16C where the CPU has it)
// against the scalar conversions: every half, and float32s around every half's ties,
// plus random bit patterns with NaN payloads, at lengths that leave scalar tails.
func TestSliceConversionsMatchScalar(t *testing.T) {
	halves := make([]uint16, 1<<16+5)
	for i := range halves {
		halves[i] = uint16(i)
	}
	f := make([]float32, len(halves))
	F16sToF32s(f, halves)
	for i, h := range halves {
		require.Equal(t, math.Float32bits(F16ToF32(h)), math.Float32bits(f[i]), "%#04x (NaNs too)", h)
	}

	r := rand.New(rand.NewPCG(5, 6))
	var src []float32
	for lo := range uint16(0x7bff) {
		mid := float32((refF16ToF64(lo) + refF16ToF64(lo+1)) / 2)
		src = append(src, mid, -mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1e9))
	}
	for range 100003 {
		src = append(src, math.Float32frombits(r.Uint32()))
	}
	h := make([]uint16, len(src))
	F32sToF16s(h, src)
	for i, v := range src {
		require.Equal(t, F32ToF16(v), h[i], "%#08x", math.Float32bits(v))
	}
}

// TestF64RoundingOnce checks the float64 conversions round once: at every midpoint
// between adjacent finite values (also the one above the largest, which ties to Inf)
// and one float64 ulp either side of it, where rounding to float32 first would land on
// the tie and pick the even neighbour for both.
func TestF64RoundingOnce(t *testing.T) {
	from64 := map[string]func(float64) uint16{"F16": F64ToF16, "BF16": F64ToBF16}
	for _, f := range formats {
		conv := from64[f.name]
		t.Run(f.name, func(t *testing.T) {
			for _, sign := range []uint16{0, 0x8000} {
				for lo := uint16(0); lo <= f.maxBits; lo++ {
					a, b := sign|lo, sign|(lo+1)
					mid := (f.ref(a) + f.ref(b)) / 2
					if lo == f.maxBits { // b is Inf: the tie is half an ulp above the largest
						mid = f.ref(a) + (f.ref(a)-f.ref(a-1))/2
					}
					even := a
					if a&1 == 1 {
						even = b
					}
					require.Equal(t, even, conv(mid), "%s tie between %#04x and %#04x", f.name, a, b)
					away := math.Copysign(math.Inf(1), mid)
					require.Equal(t, a, conv(math.Nextafter(mid, 0)), "%s just below the tie %#04x/%#04x", f.name, a, b)
					require.Equal(t, b, conv(math.Nextafter(mid, away)), "%s just above the tie %#04x/%#04x", f.name, a, b)
				}
			}
			require.Equal(t, f.infBits, conv(math.MaxFloat64), "beyond float32's range")
			require.Equal(t, f.infBits|0x8000, conv(-1e300))
			require.Equal(t, f.infBits, conv(math.Inf(1)))
			require.Equal(t, uint16(0x8000), conv(math.Copysign(0, -1)), "the sign of zero")
			require.Equal(t, uint16(0x8000), conv(-1e-300), "underflow keeps the sign")
			n := conv(math.Copysign(math.NaN(), -1))
			require.True(t, isNaN16(f, n), "NaN stays NaN")
			require.Equal(t, uint16(0x8000), n&0x8000, "NaN keeps its sign")
			r := rand.New(rand.NewPCG(5, 6))
			for range 20000 {
				x := math.Float32frombits(r.Uint32())
				got, want := conv(float64(x)), f.fromF32(x)
				if x != x {
					require.True(t, isNaN16(f, got))
					continue
				}
				require.Equal(t, want, got, "a float32 value %v rounds as from float32", x)
			}
		})
	}
}
