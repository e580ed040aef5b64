package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDropoutMask(t *testing.T) {
	n := 100001
	for _, p := range []float32{0, 0.1, 0.5, 0.9, 1} {
		mask := make([]uint8, n)
		DropoutMask(mask, p, rand.New(rand.NewPCG(1, 2)).Uint64)
		kept := 0
		for _, m := range mask {
			require.LessOrEqual(t, m, uint8(1))
			kept += int(m)
		}
		assert.InDelta(t, float64(1-p), float64(kept)/float64(n), 0.01, "p=%v", p)
		again := make([]uint8, n)
		DropoutMask(again, p, rand.New(rand.NewPCG(1, 2)).Uint64)
		assert.Equal(t, mask, again, "the same source gives the same mask")
	}
	// Two elements per draw: the low half decides the first.
	draws := []uint64{0x00000000_ffffffff, 0xffffffff_00000000}
	i := 0
	mask := make([]uint8, 3)
	DropoutMask(mask, 0.5, func() uint64 { i++; return draws[i-1] })
	assert.Equal(t, []uint8{1, 0, 0}, mask)
	assert.Equal(t, 2, i)
	assert.Panics(t, func() { DropoutMask(mask, 1.5, nil) })
}

func TestDropoutApply(t *testing.T) {
	r := rand.New(rand.NewPCG(90, 91))
	shape := []int{4, 5}
	for _, dt := range floatTypes {
		x := randView(r, dt, shape, func() float64 { return r.NormFloat64() })
		mask := make([]uint8, 20)
		DropoutMask(mask, 0.3, r.Uint64)
		dst := randView(r, dt, shape, func() float64 { return 9 })
		Dropout(dst.op(), x.op(), Bool(mask, Contiguous(shape...)), 0.3)
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
	Dropout(F32(all, Contiguous(2)), F32(all, Contiguous(2)), Bool([]uint8{0, 0}, Contiguous(2)), 1)
	assert.Equal(t, []float32{0, 0}, all, "p = 1 drops everything")
}
