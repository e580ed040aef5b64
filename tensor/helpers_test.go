package tensor_test

import "github.com/subletml/sublet/tensor/tensortest"

// The shared test helpers under the short names the tests use.
var (
	newCPU         = tensortest.CPU
	newSim         = tensortest.Sim
	dataDevices    = tensortest.DataDevices
	allocator      = tensortest.Allocator
	stats          = tensortest.Stats
	requested      = tensortest.Requested
	requireEmpty   = tensortest.RequireEmpty
	requireOpError = tensortest.RequireOpError
	f32            = tensortest.F32
	vals           = tensortest.Values
)
