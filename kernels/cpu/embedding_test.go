package cpu

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/subletml/sublet/kernels"
)

func TestEmbedding(t *testing.T) { bothTypes(t, testEmbedding[float32], testEmbedding[float64]) }

func testEmbedding[T float](t *testing.T) {
	r := rand.New(rand.NewPCG(80, 81))
	for _, dim := range []int{1, 5, 64, 200} {
		vocab, count := 11, 37
		w := randFloats[T](r, vocab*dim, 1)
		idx := make([]int64, count)
		for i := range idx {
			idx[i] = int64(r.IntN(vocab))
		}
		dst := make([]T, count*dim)
		require.NoError(t, Embedding(dst, w, dim, idx))
		for i, v := range idx {
			assert.Equal(t, w[int(v)*dim:int(v+1)*dim], dst[i*dim:(i+1)*dim])
		}
		g := randFloats[T](r, count*dim, 1)
		dw := make([]T, vocab*dim)
		require.NoError(t, EmbeddingBackward(dw, g, dim, idx))
		want := make([]T, vocab*dim)
		for i, v := range idx { // the definition, in index order
			for j := range dim {
				want[int(v)*dim+j] += g[i*dim+j]
			}
		}
		assert.Equal(t, want, dw, "dim %d", dim)
	}
}

func TestEmbeddingBadIndex(t *testing.T) {
	w := []float32{1, 2, 3, 4}
	dst := []float32{9, 9}
	err := Embedding(dst, w, 2, []int64{2})
	var ie *kernels.IndexError
	require.True(t, errors.As(err, &ie))
	assert.Equal(t, int64(2), ie.Index)
	assert.Equal(t, 2, ie.Limit)
	assert.Equal(t, []float32{9, 9}, dst)
	dw := make([]float32, 4)
	require.Error(t, EmbeddingBackward(dw, []float32{1, 1, 1, 1}, 2, []int64{0, -1}))
	assert.Equal(t, make([]float32, 4), dw, "nothing added")
	assert.Panics(t, func() { _ = Embedding(dst, w[:3], 2, []int64{0}) }, "table not whole rows")
}
