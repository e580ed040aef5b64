package nn_test

import (
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/nn/nntest"
	"github.com/subletml/sublet/tensor"
)

var (
	newCPU       = nntest.CPU
	newMeta      = nntest.Meta
	allocator    = nntest.Allocator
	requested    = nntest.Requested
	requireLive  = nntest.RequireLive
	requireEmpty = nntest.RequireEmpty
	cat          = nntest.Cat
)

// paramSizes is the byte size of each parameter of m.
func paramSizes(m nn.Module) []int64 { return nntest.Sizes(nn.Parameters(m)...) }

func f32(s *tensor.Scope, d device.Device, data []float32, shape ...int) *tensor.Tensor {
	return tensor.FromSlice(s, d, dtype.F32, data, shape...)
}

func vals(t *tensor.Tensor) []float32 { return tensor.ToSlice[float32](t) }
