package cuda

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/dtype"
)

// TestEmbeddingBackwardSortSteps replays the sort steps EmbeddingBackward launches,
// each kernel's compare-and-swap written again here as src/embedding.cu does it, on
// keys of many counts (one block of the sort, several, a count far from a power of
// two): the steps sort every time, and the last launch adds the runs.
func TestEmbeddingBackwardSortSteps(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, count := range []int{1, 7, embeddingChunk, embeddingChunk + 1, 1500, 5000, 600000} { // the last past the scratch: keys from the allocator
		b, rec := newRecording(t)
		var o operands
		const dim = 3
		dw, g, idx := o.dense(dtype.F32, 11, dim), o.dense(dtype.F32, count, dim), o.dense(dtype.I64, count)
		require.NoError(t, b.EmbeddingBackward(dw, g, idx, dim))
		launches, _ := rec.take()
		require.Equal(t, kEmbeddingKeys, launches[0].k)
		padded := int(launches[0].args[3].bits)
		require.GreaterOrEqual(t, padded, max(count, embeddingChunk))
		require.Zero(t, padded&(padded-1), "a power of two")

		keys := make([]uint64, padded)
		for i := range keys {
			keys[i] = ^uint64(0)
			if i < count {
				keys[i] = uint64(r.IntN(11))<<32 | uint64(i)
			}
		}
		want := slices.Sorted(slices.Values(keys))
		for _, l := range launches[1 : len(launches)-1] {
			switch l.k {
			case kEmbeddingSortGlobal:
				k, j := int(l.args[2].bits), int(l.args[3].bits)
				for tid := range padded / 2 {
					cas(keys, (tid/j)*2*j+tid%j, j, k, 0)
				}
			case kEmbeddingSortLocal:
				k := int(l.args[1].bits)
				require.Equal(t, uint32(padded/embeddingChunk), l.cfg.Grid.X)
				for base := 0; base < padded; base += embeddingChunk {
					x := keys[base : base+embeddingChunk]
					k0, k1 := k, k
					if k == 0 {
						k0, k1 = 2, embeddingChunk
					}
					for kk := k0; kk <= k1; kk *= 2 {
						for j := min(kk, embeddingChunk) / 2; j > 0; j /= 2 {
							for tid := range block {
								cas(x, (tid/j)*2*j+tid%j, j, kk, base)
							}
						}
					}
				}
			default:
				t.Fatalf("count %d: launch of %v inside the sort", count, l.k)
			}
		}
		assert.Equal(t, want, keys, "count %d: sorted", count)
		assert.Equal(t, kEmbeddingBackward, launches[len(launches)-1].k)
		assert.Zero(t, b.al.Stats().RequestedBytes[alloc.StatAll].Current, "count %d: the keys' memory given back", count)
	}
}

// cas is bitonic_cas of src/embedding.cu.
func cas(x []uint64, a, j, k, base int) {
	u, v := x[a], x[a+j]
	up := (base+a)&k == 0
	if (u > v) == up {
		x[a], x[a+j] = v, u
	}
}
