package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/subletml/sublet/kernels"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPhiloxKnownAnswers(t *testing.T) {
	// Random123's kat_vectors for philox4x32 10: counter, key, result.
	for _, c := range []struct {
		ctr  [4]uint32
		key  [2]uint32
		want [4]uint32
	}{
		{[4]uint32{}, [2]uint32{}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff},
			[4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0},
			[4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	} {
		assert.Equal(t, c.want, philox4x32(c.ctr, c.key))
	}
}

func TestDropoutMask(t *testing.T) {
	n := 100001
	for _, p := range []float64{0, 0.1, 0.5, 0.9, 1} {
		mask := make([]uint8, n)
		DropoutMask(mask, p, 7)
		kept := 0
		for _, m := range mask {
			require.LessOrEqual(t, m, uint8(1))
			kept += int(m)
		}
		assert.InDelta(t, float64(1-p), float64(kept)/float64(n), 0.01, "p=%v", p)
		again := make([]uint8, n)
		DropoutMask(again, p, 7)
		assert.Equal(t, mask, again, "the same seed gives the same mask")
		if p > 0 && p < 1 {
			DropoutMask(again, p, 8)
			assert.NotEqual(t, mask, again, "another seed, another mask")
		}
	}
	// Element i keeps when word i%4 of the block at counter i/4 reaches p·2³²: with the
	// all-zero key, block 0 is the first known answer above.
	mask := make([]uint8, 5)
	DropoutMask(mask, float64(0xa0000000)/(1<<32), 0)
	w1 := philox4x32([4]uint32{1}, [2]uint32{})
	assert.Equal(t, []uint8{0, 1, 1, 0, boolByte(w1[0] >= 0xa0000000)}, mask)
	// A prefix of a longer mask is the shorter mask: the work split changes nothing.
	long := make([]uint8, 3*grain+5)
	DropoutMask(long, 0.3, 11)
	short := make([]uint8, 77)
	DropoutMask(short, 0.3, 11)
	assert.Equal(t, short, long[:77])
	assert.Panics(t, func() { DropoutMask(mask, 1.5, 0) })
}

func TestDropoutApply(t *testing.T) {
	r := rand.New(rand.NewPCG(90, 91))
	shape := []int{4, 5}
	for _, dt := range floatTypes {
		x := randView(r, dt, shape, func() float64 { return r.NormFloat64() })
		mask := make([]uint8, 20)
		DropoutMask(mask, 0.3, r.Uint64())
		dst := randView(r, dt, shape, func() float64 { return 9 })
		Dropout(dst.op(), x.op(), Bool(mask, kernels.Contiguous(shape...)), 0.3)
		i := 0
		forEachIndex(shape, func(idx []int) {
			want := 0.0
			if mask[i] == 1 {
				want = roundTo(dt, x.get(idx)/0.7)
			}
			requireClose(t, dt, want, dst.get(idx), "%v at %v", dt, idx)
			i++
		})
	}
	all := []float32{1, 2}
	Dropout(F32(all, kernels.Contiguous(2)), F32(all, kernels.Contiguous(2)), Bool([]uint8{0, 0}, kernels.Contiguous(2)), 1)
	assert.Equal(t, []float32{0, 0}, all, "p = 1 drops everything")
}
