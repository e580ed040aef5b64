package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// The gradient of an operand that was broadcast is summed back to its shape: a rank-0
// operand, operands broadcast against each other, a strided (transposed) operand, an
// Expand view, and an operand of another type (its gradient comes back in its type).
func TestBroadcastGradientsSumToEachOperandsShape(t *testing.T) {
	for _, td := range dataDevices(t) {
		t.Run(td.Name, func(t *testing.T) {
			d := td.Device
			s := tensor.NewScope()
			scalar := f32(s, d, []float32{2}).Reshape().SetRequiresGrad(true)
			col := f32(s, d, []float32{1, 2}, 2, 1).SetRequiresGrad(true)
			row := f32(s, d, []float32{1, 10, 100}, 1, 3).SetRequiresGrad(true)
			wide := f32(s, d, []float32{1, 2, 3, 4, 5, 6}, 3, 2).SetRequiresGrad(true) // used transposed
			half := f32(s, d, []float32{1, 2, 3}).Cast(dtype.F16).Detach().SetRequiresGrad(true)

			// y[i][j] = scalar·col[i]·row[j] + wideᵀ[i][j] + half[j], summed.
			y := scalar.Mul(col).Mul(row).Add(wide.T()).Add(half)
			require.Equal(t, []int{2, 3}, y.Shape())
			require.Equal(t, dtype.F32, y.DType())
			y.Sum().Backward()

			require.Empty(t, scalar.Grad().Shape())
			require.Equal(t, []float32{3 * 111}, vals(scalar.Grad()), "Σ col·row")
			require.Equal(t, []int{2, 1}, col.Grad().Shape())
			require.Equal(t, []float32{2 * 111, 2 * 111}, vals(col.Grad()))
			require.Equal(t, []int{1, 3}, row.Grad().Shape())
			require.Equal(t, []float32{6, 6, 6}, vals(row.Grad()), "Σ scalar·col")
			require.Equal(t, []float32{1, 1, 1, 1, 1, 1}, vals(wide.Grad()))
			require.Equal(t, dtype.F16, half.Grad().DType())
			require.Equal(t, []float32{2, 2, 2}, vals(half.Grad()))

			e := f32(s, d, []float32{1, 2, 3}, 3, 1).SetRequiresGrad(true)
			e.Expand(2, 3, 4).Mul(f32(s, d, []float32{1, 2}, 2, 1, 1)).Sum().Backward()
			require.Equal(t, []int{3, 1}, e.Grad().Shape())
			require.Equal(t, []float32{12, 12, 12}, vals(e.Grad()), "4 copies · (1+2)")
			s.Close()
			requireEmpty(t, d)
		})
	}
}
