package data

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func batchesOf(t *testing.T, s Sampler, e int) [][]int {
	t.Helper()
	b, err := s.Batches(e)
	require.NoError(t, err)
	return b
}

func flatten(bs [][]int) []int {
	var out []int
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

func TestSequential(t *testing.T) {
	assert.Equal(t, [][]int{{0, 1, 2}, {3, 4, 5}, {6}}, batchesOf(t, Sequential{N: 7, Batch: 3}, 0))
	assert.Equal(t, [][]int{{0, 1, 2}, {3, 4, 5}}, batchesOf(t, Sequential{N: 7, Batch: 3, DropLast: true}, 4))
	assert.Empty(t, batchesOf(t, Sequential{N: 0, Batch: 3}, 0))
}

func TestShuffleIsAPermutationPerEpoch(t *testing.T) {
	s := Shuffle{N: 100, Batch: 8, Seed: 3}
	e0, e1 := batchesOf(t, s, 0), batchesOf(t, s, 1)
	require.Len(t, e0, 13)
	assert.Len(t, e0[12], 4)
	for _, e := range [][][]int{e0, e1} {
		got := flatten(e)
		slices.Sort(got)
		assert.Equal(t, flatten(batchesOf(t, Sequential{N: 100, Batch: 100}, 0)), got, "every sample once")
	}
	assert.NotEqual(t, e0, e1, "a new order every epoch")
	assert.Equal(t, e0, batchesOf(t, s, 0), "the same seed and epoch, the same order")
	assert.Len(t, batchesOf(t, Shuffle{N: 100, Batch: 8, Seed: 3, DropLast: true}, 0), 12)
}

func TestBucketsGroupSimilarLengths(t *testing.T) {
	lengths := []int{5, 1, 9, 3, 7, 2, 8, 4, 6, 0}
	b := Buckets{Lengths: lengths, Batch: 3, Seed: 1}
	sorted := [][]int{{9, 1, 5}, {3, 7, 0}, {8, 4, 6}, {2}} // lengths 0 1 2 | 3 4 5 | 6 7 8 | 9
	asc := batchesOf(t, Buckets{Lengths: lengths, Batch: 3, Ascending: true}, 0)
	assert.Equal(t, sorted, asc)
	for e := range 3 {
		got := batchesOf(t, b, e)
		assert.ElementsMatch(t, sorted, got, "epoch %d: the same batches", e)
	}
	orders := map[string]bool{}
	for e := range 8 {
		orders[fmtBatches(batchesOf(t, b, e))] = true
	}
	assert.Greater(t, len(orders), 1, "the batches come in a new order each epoch")

	ties := batchesOf(t, Buckets{Lengths: []int{2, 1, 2, 1}, Batch: 2, Ascending: true}, 0)
	assert.Equal(t, [][]int{{1, 3}, {0, 2}}, ties, "ties by index")
}

func fmtBatches(bs [][]int) string {
	s := ""
	for _, b := range bs {
		s += string(rune('a' + b[0]))
	}
	return s
}

func TestSamplerSettingsAreChecked(t *testing.T) {
	for _, s := range []Sampler{
		Sequential{N: 3, Batch: 0}, Sequential{N: -1, Batch: 1}, Shuffle{N: 3}, Buckets{Lengths: []int{1}},
		Buckets{Lengths: []int{1, -2}, Batch: 1},
	} {
		_, err := s.Batches(0)
		assert.Error(t, err, "%+v", s)
	}
	_, err := Buckets{Lengths: []int{1, -2}, Batch: 1}.Batches(0)
	assert.ErrorContains(t, err, "Lengths[1] is -2")
}
