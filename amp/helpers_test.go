package amp_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/amp"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

const MiB = 1 << 20

// autocast is amp.Autocast that fails the test on error.
func autocast(t testing.TB, parent *tensor.Scope, dt dtype.DType, opts ...amp.Option) *tensor.Scope {
	t.Helper()
	s, err := amp.Autocast(parent, dt, opts...)
	require.NoError(t, err)
	return s
}

func f32(s *tensor.Scope, d device.Device, data []float32, shape ...int) *tensor.Tensor {
	return tensor.FromSlice(s, d, dtype.F32, data, shape...)
}

func vals(t *tensor.Tensor) []float32 { return tensor.ToSlice[float32](t) }

// param makes an F32 parameter of shape from data (owned by the caller).
func param(d device.Device, data []float32, shape ...int) *tensor.Tensor {
	s := tensor.NewScope()
	defer s.Close()
	return f32(s, d, data, shape...).AsParameter()
}

// seq returns n values (i+1)·step.
func seq(n int, step float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i+1) * step
	}
	return v
}
