// Package toy holds the seeded data sets sublet's examples train on: classification
// sets on the host (Spirals, Noise, a Teacher's labelled points) and batches of noise
// drawn on a device (Random). The same seed gives the same data on every run and every
// device.
package toy

import (
	"math"
	"math/rand/v2"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// Dataset is a classification set on the host: points of Dim features, row-major in X,
// and their classes.
type Dataset struct {
	X      []float32
	Labels []int64
	Dim    int
}

// Len is the number of points.
func (d Dataset) Len() int { return len(d.Labels) }

// Spirals returns n points on k interleaved spiral arms in the plane (CS231n's toy
// set), seeded: arm c winds from the origin out to radius 1 through a turn of 4
// radians, with Gaussian noise of sd 0.2 on the angle. A linear model gets about
// chance; an MLP separates them.
func Spirals(seed uint64, n, k int) Dataset {
	r := rand.New(rand.NewPCG(seed, 0x5b1a15))
	d := Dataset{X: make([]float32, 2*n), Labels: make([]int64, n), Dim: 2}
	for i := range n {
		c := i % k
		t := r.Float64()
		theta := float64(c)*2*math.Pi/float64(k) + 4*t + 0.2*r.NormFloat64()
		d.X[2*i], d.X[2*i+1] = float32(t*math.Sin(theta)), float32(t*math.Cos(theta))
		d.Labels[i] = int64(c)
	}
	return d
}

// Noise returns n points of dim standard normal features with uniform labels among k
// classes, seeded: data that only has to be of the right size (benchmarks).
func Noise(seed uint64, n, dim, k int) Dataset {
	r := rand.New(rand.NewPCG(seed, 0x7e57))
	d := Dataset{X: make([]float32, n*dim), Labels: make([]int64, n), Dim: dim}
	for i := range d.X {
		d.X[i] = float32(r.NormFloat64())
	}
	for i := range d.Labels {
		d.Labels[i] = int64(r.IntN(k))
	}
	return d
}

// Split returns the first n points and the rest.
func (d Dataset) Split(n int) (Dataset, Dataset) {
	return Dataset{d.X[:n*d.Dim], d.Labels[:n], d.Dim}, Dataset{d.X[n*d.Dim:], d.Labels[n:], d.Dim}
}

// Batch gathers the points at idx into x and labels (reused buffers).
func (d Dataset) Batch(idx []int, x []float32, labels []int64) ([]float32, []int64) {
	x, labels = x[:0], labels[:0]
	for _, i := range idx {
		x = append(x, d.X[i*d.Dim:(i+1)*d.Dim]...)
		labels = append(labels, d.Labels[i])
	}
	return x, labels
}

// Random returns a batch of n samples in s on dev, for an example where only its memory
// matters: features of standard normal values (F32, n × features) drawn on the device,
// and labels uniform over [0, classes) (I64), both from s's generator, which s must have
// (tensor.WithGenerator). Nothing is drawn on the host but the labels, so a batch for the
// meta device costs nothing.
func Random(s *tensor.Scope, dev device.Device, n, features, classes int) (x, labels *tensor.Tensor) {
	x = s.Randn(dev, dtype.F32, n, features)
	l := make([]int64, n)
	for i := range l {
		l[i] = int64(s.Generator().Uint64() % uint64(classes))
	}
	return x, tensor.FromSlice(s, dev, dtype.I64, l)
}
