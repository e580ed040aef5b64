package dist

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func samplers(t *testing.T, n, world int, c SamplerConfig) []*Sampler {
	t.Helper()
	out := make([]*Sampler, world)
	for r := range out {
		s, err := NewSampler(n, r, world, c)
		require.NoError(t, err)
		out[r] = s
	}
	return out
}

func TestSamplerSplitsAsPyTorchsDistributedSampler(t *testing.T) {
	ss := samplers(t, 10, 3, SamplerConfig{})
	assert.Equal(t, 4, ss[0].Len())
	assert.Equal(t, []int{0, 3, 6, 9}, ss[0].Indices(0))
	assert.Equal(t, []int{1, 4, 7, 0}, ss[1].Indices(0), "the tail is padded with the first indices")
	assert.Equal(t, []int{2, 5, 8, 1}, ss[2].Indices(0))

	ss = samplers(t, 10, 3, SamplerConfig{DropLast: true})
	assert.Equal(t, 3, ss[0].Len())
	assert.Equal(t, []int{0, 3, 6}, ss[0].Indices(0))
	assert.Equal(t, []int{2, 5, 8}, ss[2].Indices(0))

	ss = samplers(t, 2, 5, SamplerConfig{})
	for r, s := range ss {
		assert.Equal(t, []int{r % 2}, s.Indices(0), "fewer samples than ranks: padded round and round")
	}
	assert.Equal(t, "Sampler(2 samples, rank 4 of 5, 1 each)", ss[4].String())
	assert.Empty(t, samplers(t, 0, 2, SamplerConfig{})[1].Indices(0))
}

func TestShuffledShardsMakeTheWholeBatch(t *testing.T) {
	const n, world, batch = 24, 3, 2
	c := SamplerConfig{Shuffle: true, Seed: 9}
	whole := samplers(t, n, 1, c)[0]
	ss := samplers(t, n, world, c)
	for epoch := range 3 {
		order := whole.Indices(epoch)
		assert.ElementsMatch(t, seq(n), order, "a permutation")
		if epoch > 0 {
			assert.NotEqual(t, whole.Indices(epoch-1), order, "each epoch its own order")
		}
		assert.Equal(t, order, whole.Indices(epoch), "the same order each time it is asked")
		for k := 0; k < n/(batch*world); k++ {
			var step []int
			for _, s := range ss {
				step = append(step, s.Indices(epoch)[k*batch:(k+1)*batch]...)
			}
			assert.ElementsMatch(t, order[k*batch*world:(k+1)*batch*world], step, "epoch %d step %d: the ranks' batches are one process's batch", epoch, k)
		}
	}
}

func TestSamplerErrors(t *testing.T) {
	for _, c := range []struct {
		n, rank, world int
		drop           bool
		want           string
	}{
		{-1, 0, 1, false, "fewer than 0 samples"},
		{10, 2, 2, false, "want 0 ≤ rank < world size 2"},
		{10, 0, 0, false, "want 0 ≤ rank < world size 0"},
		{1, 0, 2, true, "fewer samples than ranks (2) with DropLast"},
	} {
		_, err := NewSampler(c.n, c.rank, c.world, SamplerConfig{DropLast: c.drop})
		require.ErrorIs(t, err, ErrConfig)
		assert.Contains(t, err.Error(), c.want)
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
