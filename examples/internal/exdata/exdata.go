// Package exdata makes the synthetic batches sublet's examples train on when only their
// memory matters: reproducible from a seed, on any device.
package exdata

import (
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// Random returns a batch of n samples in s on dev: features of standard normal values
// (F32, n × features) and labels uniform over [0, classes) (I64), both drawn from s's
// generator, which s must have (tensor.WithGenerator).
func Random(s *tensor.Scope, dev device.Device, n, features, classes int) (x, labels *tensor.Tensor) {
	x = s.Randn(dev, dtype.F32, n, features)
	l := make([]int64, n)
	for i := range l {
		l[i] = int64(s.Generator().Uint64() % uint64(classes))
	}
	return x, tensor.FromSlice(s, dev, dtype.I64, l)
}
