package cpu

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// The logits form's input gradient reads four operands: into an F16 output, through
// the F32 buffer, with x read transposed and pw broadcast along the rows, it matches
// the float64 formula.
func TestBCEWithLogitsBackwardIntoHalf(t *testing.T) {
	// x is a [3, 2] view of a [2, 3] buffer (its transpose).
	xb := []float32{-3, 0.5, 2, -0.25, 1, 4}
	x := F32(xb, kernels.Layout{Shape: []int{3, 2}, Strides: []int{1, 3}})
	yb := []float32{0, 1, 0.5, 1, 1, 0}
	y := F32(yb, kernels.Contiguous(3, 2))
	pw := F32([]float32{2, 0.5}, kernels.Contiguous(2))
	g := F32([]float32{0.5}, kernels.Layout{})
	out := make([]uint16, 6)
	BinaryCrossEntropyWithLogitsBackward(kernels.ArgA, F16(out, kernels.Contiguous(3, 2)), g, x, y, pw)
	for i := range 3 {
		for j := range 2 {
			v, tg, w := float64(xb[j*3+i]), float64(yb[i*2+j]), []float64{2, 0.5}[j]
			s := 1 / (1 + math.Exp(-v))
			want := 0.5 * ((1+(w-1)*tg)*s - w*tg)
			require.InDelta(t, want, float64(dtype.F16ToF32(out[i*2+j])), 1e-3, "element [%d %d]", i, j)
		}
	}
}

func TestBCECountsValuesOutsideTheUnitInterval(t *testing.T) {
	x := F32([]float32{0, 1, 1.0001, -0, float32(math.NaN()), float32(math.Inf(1))}, kernels.Contiguous(6))
	y := F32([]float32{1}, kernels.Layout{})
	out := make([]float32, 6)
	require.Equal(t, 3, BinaryCrossEntropy(F32(out, kernels.Contiguous(6)), x, y))
	require.Equal(t, float32(100), out[0], "−ln 0 is clamped at 100")
	require.Equal(t, float32(0), out[1])
}
