package p

import (
	checkpoint "github.com/subletml/sublet/checkpoint"
	tensor "github.com/subletml/sublet/tensor"
)

func _() {
{
//line checkpoint/doc.go:10
out := checkpoint.Checkpoint(block.Forward, x) // block.Forward runs again in backward
y := checkpoint.Sequential(layers, 4, x)       // checkpoint_sequential: 4 segments
outs := checkpoint.CheckpointN(func(in []*tensor.Tensor) []*tensor.Tensor {
	return []*tensor.Tensor{in[0].Mul(in[1]), in[1].Tanh()} // several tensors in and out
}, x, y)
}
}
