package nn_test

import (
	"slices"

	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor/tensortest"
)

var (
	newCPU        = tensortest.CPU
	newMeta       = tensortest.Meta
	allocator     = tensortest.Allocator
	requested     = tensortest.Requested
	peakRequested = tensortest.PeakRequested
	requireLive   = tensortest.RequireLive
	requireEmpty  = tensortest.RequireEmpty
	cat           = slices.Concat[[]int64]
	f32           = tensortest.F32
	vals          = tensortest.Values
)

// paramSizes is the byte size of each parameter of m.
func paramSizes(m nn.Module) []int64 { return tensortest.Sizes(nn.Parameters(m)...) }
