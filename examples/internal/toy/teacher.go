package toy

import (
	"math"
	"math/rand/v2"
)

// Teacher is a seeded classification task the examples train on: points of Features
// standard normal coordinates, labelled by the largest of Classes fixed random
// projections. A model can fit it, so losses go down.
type Teacher struct {
	Features, Classes int
	proj              []float64 // Features × Classes
}

// NewTeacher draws the projections from seed.
func NewTeacher(seed uint64, features, classes int) *Teacher {
	r := rand.New(rand.NewPCG(seed, 0x7eac4e7))
	t := &Teacher{Features: features, Classes: classes, proj: make([]float64, features*classes)}
	for i := range t.proj {
		t.proj[i] = r.NormFloat64()
	}
	return t
}

// Point draws one point from r into x (Features values) and returns its label.
func (t *Teacher) Point(r *rand.Rand, x []float32) int64 {
	for j := range x {
		x[j] = float32(r.NormFloat64())
	}
	return t.Label(x)
}

// Label is the class of x.
func (t *Teacher) Label(x []float32) int64 {
	best, label := math.Inf(-1), int64(0)
	for k := range t.Classes {
		v := 0.0
		for j, xj := range x {
			v += float64(xj) * t.proj[j*t.Classes+k]
		}
		if v > best {
			best, label = v, int64(k)
		}
	}
	return label
}

// Batch draws n points from r: their coordinates row after row, and their labels.
func (t *Teacher) Batch(r *rand.Rand, n int) ([]float32, []int64) {
	x, labels := make([]float32, n*t.Features), make([]int64, n)
	for i := range n {
		labels[i] = t.Point(r, x[i*t.Features:(i+1)*t.Features])
	}
	return x, labels
}
