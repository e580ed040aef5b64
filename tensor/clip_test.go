package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

func TestScaleByAndClampInPlace(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f32(s, d, []float32{-2, 0.5, 3, 4}, 2, 2)
	v := x.Version()
	x.ScaleBy(f32(s, d, []float32{2, -1}, 2))
	require.Equal(t, []float32{-4, -0.5, 6, -4}, vals(x))
	x.ClampInPlace(-1, math.Inf(1))
	require.Equal(t, []float32{-1, -0.5, 6, -1}, vals(x))
	x.ClampInPlace(-0.75, 0.75)
	require.Equal(t, []float32{-0.75, -0.5, 0.75, -0.75}, vals(x))
	require.Equal(t, v+3, x.Version(), "each write bumps the version")
	h := s.Ones(d, dtype.F16, 2)
	h.ScaleBy(s.Full(d, dtype.F32, 0.5))
	require.Equal(t, []float32{0.5, 0.5}, vals(h))

	requireOpError(t, "ClampInPlace", tensor.ErrShape, func() { x.ClampInPlace(1, -1) })
	requireOpError(t, "ScaleBy", tensor.ErrShape, func() { x.ScaleBy(s.Ones(d, dtype.F32, 3)) })
	requireOpError(t, "ScaleBy", tensor.ErrDType, func() { x.ScaleBy(s.Ones(d, dtype.I64, 1)) })
	y := f32(s, d, []float32{1}, 1).SetRequiresGrad(true).Exp()
	requireOpError(t, "ClampInPlace", tensor.ErrGrad, func() { y.ClampInPlace(0, 1) })
	s.Close()
	requireEmpty(t, d)
}
