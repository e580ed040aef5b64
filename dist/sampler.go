package dist

import (
	"fmt"
	"math/rand/v2"
	"strconv"
)

// SamplerConfig configures NewSampler.
type SamplerConfig struct {
	// Shuffle draws a new order of the whole data set every epoch, the same on every
	// rank (from Seed and the epoch); without it the order is 0, 1, 2, ...
	Shuffle bool
	Seed    uint64
	// DropLast drops the tail that does not divide evenly among the ranks; without it
	// the tail is padded with the first indices again, so every rank gets as many.
	DropLast bool
}

// Sampler gives each rank its share of a data set's indices every epoch, as PyTorch's
// DistributedSampler: the epoch's order (shuffled alike on every rank) is cut to a
// multiple of the world size, and rank r takes positions r, r+W, r+2W, ... So when
// every rank draws batches of B from its share, step k's batches together are
// positions [k·B·W, (k+1)·B·W) of the order: one process with a batch of B·W would see
// the same samples.
type Sampler struct {
	n, rank, world int
	c              SamplerConfig
}

// NewSampler returns rank's sampler of a data set of n samples among world ranks.
func NewSampler(n, rank, world int, c SamplerConfig) (*Sampler, error) {
	switch {
	case n < 0:
		return nil, configErr("samples", strconv.Itoa(n), "a data set cannot have fewer than 0 samples")
	case world < 1 || rank < 0 || rank >= world:
		return nil, configErr("rank", strconv.Itoa(rank), "want 0 ≤ rank < world size %d", world)
	case c.DropLast && n < world && n > 0:
		return nil, configErr("samples", strconv.Itoa(n), "fewer samples than ranks (%d) with DropLast: no rank would get any", world)
	}
	return &Sampler{n: n, rank: rank, world: world, c: c}, nil
}

// Len is the number of indices each rank gets per epoch.
func (s *Sampler) Len() int {
	if s.c.DropLast {
		return s.n / s.world
	}
	return (s.n + s.world - 1) / s.world
}

// Indices returns this rank's indices for epoch (Len of them, each in [0, n)).
func (s *Sampler) Indices(epoch int) []int {
	order := make([]int, s.n)
	if s.c.Shuffle {
		order = rand.New(rand.NewPCG(s.c.Seed, uint64(epoch))).Perm(s.n)
	} else {
		for i := range order {
			order[i] = i
		}
	}
	total := s.Len() * s.world
	for len(order) < total && s.n > 0 { // pad with the start again (several times if n < world)
		order = append(order, order[:min(s.n, total-len(order))]...)
	}
	order = order[:total]
	out := make([]int, 0, s.Len())
	for i := s.rank; i < total; i += s.world {
		out = append(out, order[i])
	}
	return out
}

func (s *Sampler) String() string {
	return fmt.Sprintf("Sampler(%d samples, rank %d of %d, %d each)", s.n, s.rank, s.world, s.Len())
}
