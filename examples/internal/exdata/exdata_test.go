package exdata

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

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
