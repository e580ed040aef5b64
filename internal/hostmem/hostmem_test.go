package hostmem

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func base(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func TestAllocIsZeroedWholePages(t *testing.T) {
	b, err := Alloc(10)
	require.NoError(t, err)
	require.Len(t, b, int(PageSize()), "rounded up to a page")
	assert.Zero(t, int64(base(b))%PageSize())
	for _, v := range b {
		require.Zero(t, v)
	}
	b[len(b)-1] = 1
	require.NoError(t, Free(b))
}

func TestBadSizesAndRanges(t *testing.T) {
	// The largest int plus one: past a 32-bit address space, or 2^62 + 1 on 64 bits.
	beyond := min(int64(^uint(0)>>1), 1<<62) + 1
	for _, size := range []int64{0, -5, 1<<62 + 1, beyond} {
		_, err := Alloc(size)
		assert.Error(t, err, "Alloc(%d)", size)
		_, err = Reserve(size)
		assert.Error(t, err, "Reserve(%d)", size)
	}
	r, err := Reserve(4 * PageSize())
	require.NoError(t, err)
	p := PageSize()
	assert.Error(t, Commit(r[1:p+1]), "unaligned start")
	assert.Error(t, Commit(r[:p-1]), "partial page")
	assert.Error(t, Commit(r[:0]), "empty")
	assert.Error(t, Decommit(r[p/2:p]), "unaligned start")
	assert.Error(t, Free(r[1:p+1]), "unaligned mapping")
	require.NoError(t, Release(r))
}

func TestCommitDecommit(t *testing.T) {
	p := PageSize()
	r, err := Reserve(4 * p)
	require.NoError(t, err)
	require.Len(t, r, int(4*p))
	require.NoError(t, Commit(r[p:3*p]))
	r[p] = 7
	r[3*p-1] = 9
	require.NoError(t, Decommit(r[2*p:3*p]))
	assert.Equal(t, byte(7), r[p], "the page left committed keeps its data")
	require.NoError(t, Commit(r[2*p:3*p]))
	assert.Zero(t, r[3*p-1], "a decommitted page reads as zeros when committed again")
	require.NoError(t, Decommit(r[p:3*p]))
	require.NoError(t, Release(r))
}

func TestPhysical(t *testing.T) {
	total, avail, err := Physical()
	if err != nil {
		t.Skip(err)
	}
	assert.Positive(t, total)
	assert.LessOrEqual(t, avail, total)
}

func TestRoundUp(t *testing.T) {
	assert.Equal(t, int64(0), RoundUp(0, 512))
	assert.Equal(t, int64(512), RoundUp(1, 512))
	assert.Equal(t, int64(512), RoundUp(512, 512))
	assert.Equal(t, int64(1024), RoundUp(513, 512))
}
