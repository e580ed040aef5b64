package toy

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

func TestSpiralsAreSeededAndSplit(t *testing.T) {
	a, b := Spirals(3, 30, 3), Spirals(3, 30, 3)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a.X, Spirals(4, 30, 3).X)
	assert.Equal(t, []int64{0, 1, 2, 0}, a.Labels[:4])
	train, test := a.Split(20)
	assert.Equal(t, 20, train.Len())
	assert.Equal(t, 10, test.Len())
	x, l := a.Batch([]int{2, 0}, nil, nil)
	assert.Equal(t, append(append([]float32{}, a.X[4:6]...), a.X[0:2]...), x)
	assert.Equal(t, []int64{2, 0}, l)
}

func TestNoise(t *testing.T) {
	d := Noise(1, 5, 3, 4)
	assert.Len(t, d.X, 15)
	for _, l := range d.Labels {
		assert.Less(t, l, int64(4))
	}
}

func TestRandomIsReproducibleAndInRange(t *testing.T) {
	d := tensortest.CPU(t)
	draw := func() ([]float32, []int64) {
		s := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(7)))
		defer s.Close()
		x, l := Random(s, d, 50, 3, 4)
		assert.Equal(t, []int{50, 3}, x.Shape())
		assert.Equal(t, dtype.I64, l.DType())
		return tensor.ToSlice[float32](x), tensor.ToSlice[int64](l)
	}
	x1, l1 := draw()
	x2, l2 := draw()
	assert.Equal(t, x1, x2)
	assert.Equal(t, l1, l2)
	seen := map[int64]bool{}
	for _, v := range l1 {
		require.True(t, v >= 0 && v < 4, "label %d", v)
		seen[v] = true
	}
	assert.Len(t, seen, 4, "50 draws cover 4 classes")
	tensortest.RequireEmpty(t, d)
}

// A teacher labels each point by the largest of its projections: the same seed, the
// same task; a point's label is Label of its coordinates.
func TestTeacher(t *testing.T) {
	a, b := NewTeacher(3, 5, 4), NewTeacher(3, 5, 4)
	xa, la := a.Batch(rand.New(rand.NewPCG(1, 2)), 200)
	xb, lb := b.Batch(rand.New(rand.NewPCG(1, 2)), 200)
	assert.Equal(t, xa, xb)
	assert.Equal(t, la, lb)
	assert.Len(t, xa, 200*5)
	seen := map[int64]int{}
	for i, l := range la {
		assert.Equal(t, l, a.Label(xa[i*5:(i+1)*5]))
		seen[l]++
	}
	assert.Len(t, seen, 4, "every class occurs")
	_, other := NewTeacher(4, 5, 4).Batch(rand.New(rand.NewPCG(1, 2)), 200)
	assert.NotEqual(t, la, other, "another seed, another task")
}
