package data

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// Sampler decides the batches of an epoch: the sample indices of each, in order. Every
// batch lists at least one sample, each in [0, Dataset.Len()); the loader refuses an
// epoch that breaks this before it asks the dataset for anything.
type Sampler interface {
	// Batches returns the batches of epoch e (counted from 0), or an error naming what
	// is wrong with the sampler's settings.
	Batches(e int) ([][]int, error)
}

// Sequential takes samples 0 to N-1 in order, Batch at a time; the last batch is
// smaller when Batch does not divide N, or dropped with DropLast.
type Sequential struct {
	N, Batch int
	DropLast bool
}

// Batches returns the same batches for every epoch.
func (s Sequential) Batches(int) ([][]int, error) {
	if err := check("Sequential", s.N, s.Batch); err != nil {
		return nil, err
	}
	idx := make([]int, s.N)
	for i := range idx {
		idx[i] = i
	}
	return chunk(idx, s.Batch, s.DropLast), nil
}

// Shuffle takes the samples 0 to N-1 in a random order drawn anew for every epoch from
// Seed and the epoch number, Batch at a time (the last batch as in Sequential).
type Shuffle struct {
	N, Batch int
	Seed     uint64
	DropLast bool
}

// Batches returns epoch e's batches.
func (s Shuffle) Batches(e int) ([][]int, error) {
	if err := check("Shuffle", s.N, s.Batch); err != nil {
		return nil, err
	}
	return chunk(epochRand(s.Seed, e).Perm(s.N), s.Batch, s.DropLast), nil
}

// Buckets is the length-aware sampler: samples of similar length share a batch, so
// that padding each batch to its longest sample wastes little. It sorts the samples by
// Lengths[i] (ties by index), cuts the sorted order into batches of Batch (the last
// holds the longest samples and may be smaller), and takes the batches in a random
// order drawn for every epoch from Seed and the epoch number, or from shortest to
// longest with Ascending.
type Buckets struct {
	Lengths   []int
	Batch     int
	Seed      uint64
	Ascending bool
}

// Batches returns epoch e's batches.
func (b Buckets) Batches(e int) ([][]int, error) {
	if err := check("Buckets", len(b.Lengths), b.Batch); err != nil {
		return nil, err
	}
	idx := make([]int, len(b.Lengths))
	for i := range idx {
		if b.Lengths[i] < 0 {
			return nil, fmt.Errorf("data.Buckets: Lengths[%d] is %d; lengths cannot be negative", i, b.Lengths[i])
		}
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(i, j int) int { return b.Lengths[i] - b.Lengths[j] })
	batches := chunk(idx, b.Batch, false)
	if !b.Ascending {
		r := epochRand(b.Seed, e)
		r.Shuffle(len(batches), func(i, j int) { batches[i], batches[j] = batches[j], batches[i] })
	}
	return batches, nil
}

func check(name string, n, batch int) error {
	if n < 0 || batch < 1 {
		return fmt.Errorf("data.%s: %d samples in batches of %d: need at least 0 samples and batches of at least 1", name, n, batch)
	}
	return nil
}

// epochRand is the generator of epoch e of a sampler seeded with seed.
func epochRand(seed uint64, e int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(e)))
}

// chunk cuts idx into batches of size (the last smaller, or dropped with dropLast).
func chunk(idx []int, size int, dropLast bool) [][]int {
	var out [][]int
	for i := 0; i < len(idx); i += size {
		end := min(i+size, len(idx))
		if dropLast && end-i < size {
			break
		}
		out = append(out, idx[i:end:end])
	}
	return out
}
