package p

import (
	alloc "github.com/subletml/sublet/alloc"
	amp "github.com/subletml/sublet/amp"
	device "github.com/subletml/sublet/device"
	nn "github.com/subletml/sublet/nn"
	optim "github.com/subletml/sublet/optim"
	os "os"
	tensor "github.com/subletml/sublet/tensor"
)

var dev device.Device
var a *alloc.Allocator
var model *nn.Sequential
var x *tensor.Tensor
var y *tensor.Tensor
var labels *tensor.Tensor
var opt optim.Optimizer
var scaler *amp.GradScaler
var step *tensor.Scope
var steps int
var epochs int
var f *os.File
