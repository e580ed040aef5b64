package main

import (
	"github.com/subletml/sublet/checkpoint"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
)

// Classifier is the model, written as a PyTorch user writes an nn.Module subclass:
// its layers are fields, and nn.Build finds them. Its state_dict keys are those of
//
//	class Classifier(nn.Module):
//	    def __init__(self, width, classes):
//	        super().__init__()
//	        self.fc1 = nn.Linear(2, width)
//	        self.middle = Block(width)
//	        self.out = nn.Linear(width, classes)
//
// fc1.weight, fc1.bias, middle.fc1.weight, …, out.bias.
type Classifier struct {
	nn.Base
	FC1    *nn.Linear
	Middle *Block // checkpointed in training: recomputed in backward
	Out    *nn.Linear
}

// Block is two Linear layers with ReLUs: the middle of the classifier.
type Block struct {
	nn.Base
	FC1, FC2 *nn.Linear
}

// NewClassifier makes a classifier of 2-D points into classes, its layers width wide,
// initialized from init as PyTorch initializes nn.Linear.
func NewClassifier(init nn.Init, width, classes int) *Classifier {
	return nn.Build(&Classifier{
		FC1:    nn.NewLinear(init, 2, width, true),
		Middle: &Block{FC1: nn.NewLinear(init, width, width, true), FC2: nn.NewLinear(init, width, width, true)},
		Out:    nn.NewLinear(init, width, classes, true),
	})
}

// Forward gives the logits of the points x [n, 2]. The middle block is checkpointed:
// what its ops save for backward is not kept but recomputed (in a scope that records
// no graph, evaluation, Checkpoint just runs it).
func (c *Classifier) Forward(x *tensor.Tensor) *tensor.Tensor {
	h := c.FC1.Forward(x).Relu()
	h = checkpoint.Checkpoint(c.Middle.Forward, h)
	return c.Out.Forward(h)
}

// Forward is relu(fc2(relu(fc1(x)))).
func (b *Block) Forward(x *tensor.Tensor) *tensor.Tensor {
	return b.FC2.Forward(b.FC1.Forward(x).Relu()).Relu()
}
