package alloc

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRoundSizeDefault(t *testing.T) {
	var off [RoundupIntervals]int
	for _, c := range []struct{ n, want int64 }{
		{1, 512}, {511, 512}, {512, 512}, {513, 1024}, {1000, 1024}, {1200, 1536},
		{MiB, MiB}, {MiB + 1, MiB + 512}, {3*MiB + 100, 3*MiB + 512},
	} {
		assert.Equal(t, c.want, roundSize(c.n, &off), "n=%d", c.n)
	}
}

func TestRoundSizeDivisions(t *testing.T) {
	d4 := fill(4)
	// The docstring example: 1200 with 4 divisions → 1280. But divisions only apply
	// when n > 512·d = 2048, so 1200 itself rounds to 1536 in the allocator.
	assert.Equal(t, int64(1280), roundupPower2NextDivision(1200, 4))
	assert.Equal(t, int64(1536), roundSize(1200, &d4))
	assert.Equal(t, int64(2048), roundSize(2048, &d4), "n = 512·d: plain rounding")
	assert.Equal(t, int64(2560), roundSize(2049, &d4), "2049: floor 2048, step 512")
	assert.Equal(t, int64(4096), roundSize(4096, &d4), "a power of two stays")
	assert.Equal(t, int64(5120), roundSize(4097, &d4), "floor 4096, step 1024")
	assert.Equal(t, int64(40*MiB), roundSize(33*MiB, &d4), "floor 32 MiB, step 8 MiB")
	assert.Equal(t, int64(48*MiB), roundSize(40*MiB+1, &d4))

	d1 := fill(1)
	assert.Equal(t, int64(33*MiB), roundSize(33*MiB, &d1), "1 division is off")

	d8 := fill(8)
	assert.Equal(t, int64(1152*MiB), roundSize(1100*MiB, &d8), "floor 1 GiB, step 128 MiB")

	// A step of 0 (more divisions than the power of two has bytes) gives the next
	// power of two; this needs n > 512·d, so only a direct call reaches it.
	assert.Equal(t, int64(8), roundupPower2NextDivision(5, 8))

	// The table is indexed by floor(log2 n) − 20 clamped to [0, 15].
	var mixed [RoundupIntervals]int
	mixed[0], mixed[5], mixed[15] = 2, 8, 4
	assert.Equal(t, int64(1536), roundSize(1025+256, &mixed), "index 0: 2 divisions, floor 1024, step 512")
	assert.Equal(t, int64(36*MiB), roundSize(33*MiB, &mixed), "index 5 = [32, 64) MiB: 8 divisions")
	assert.Equal(t, int64(64*MiB+512), roundSize(64*MiB+1, &mixed), "index 6 is off")
	assert.Equal(t, int64(80*GiB), roundSize(65*GiB, &mixed), "index 15 = 32 GiB and up: step 16 GiB")
}

func TestDivisionsIndex(t *testing.T) {
	assert.Equal(t, 0, divisionsIndex(1))
	assert.Equal(t, 0, divisionsIndex(2*MiB-1))
	assert.Equal(t, 1, divisionsIndex(2*MiB))
	assert.Equal(t, 6, divisionsIndex(64*MiB))
	assert.Equal(t, 15, divisionsIndex(32*GiB))
	assert.Equal(t, 15, divisionsIndex(1<<50))
}

func TestAllocationSizeAndPool(t *testing.T) {
	assert.Equal(t, smallPool, kindOf(SmallSize))
	assert.Equal(t, largePool, kindOf(SmallSize+512))
	assert.Equal(t, int64(SmallBuffer), allocationSize(512))
	assert.Equal(t, int64(SmallBuffer), allocationSize(SmallSize))
	assert.Equal(t, int64(LargeBuffer), allocationSize(SmallSize+512))
	assert.Equal(t, int64(LargeBuffer), allocationSize(MinLargeAlloc-512))
	assert.Equal(t, int64(MinLargeAlloc), allocationSize(MinLargeAlloc))
	assert.Equal(t, int64(12*MiB), allocationSize(10*MiB+512))
	assert.Equal(t, int64(22*MiB), allocationSize(21*MiB))
}
