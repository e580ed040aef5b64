package main

import (
	"math"
	"math/rand/v2"
)

// dataset is a classification set on the host: n points of dim features, row-major,
// and their classes.
type dataset struct {
	x      []float32
	labels []int64
	dim    int
}

func (d dataset) len() int { return len(d.labels) }

// spirals returns n points on k interleaved spiral arms in the plane (CS231n's toy
// set), seeded: arm c winds from the origin out to radius 1 through a turn of 4
// radians, with Gaussian noise of sd 0.2 on the angle. A linear model gets about
// chance; an MLP separates them.
func spirals(seed uint64, n, k int) dataset {
	r := rand.New(rand.NewPCG(seed, 0x5b1a15))
	d := dataset{x: make([]float32, 2*n), labels: make([]int64, n), dim: 2}
	for i := range n {
		c := i % k
		t := r.Float64()
		theta := float64(c)*2*math.Pi/float64(k) + 4*t + 0.2*r.NormFloat64()
		d.x[2*i], d.x[2*i+1] = float32(t*math.Sin(theta)), float32(t*math.Cos(theta))
		d.labels[i] = int64(c)
	}
	return d
}

// split returns the first n points and the rest.
func (d dataset) split(n int) (dataset, dataset) {
	return dataset{d.x[:n*d.dim], d.labels[:n], d.dim}, dataset{d.x[n*d.dim:], d.labels[n:], d.dim}
}

// batch gathers the points at idx into x and labels (reused buffers).
func (d dataset) batch(idx []int, x []float32, labels []int64) ([]float32, []int64) {
	x, labels = x[:0], labels[:0]
	for _, i := range idx {
		x = append(x, d.x[i*d.dim:(i+1)*d.dim]...)
		labels = append(labels, d.labels[i])
	}
	return x, labels
}
