package toy

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
