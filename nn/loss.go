package nn

import "github.com/subletml/sublet/tensor"

// Loss is a criterion: a scalar from a prediction and a target, both owned by scopes;
// the result belongs where an op on them puts it (tensor.ResultScope).
type Loss interface {
	Loss(pred, target *tensor.Tensor) *tensor.Tensor
}

// CrossEntropyLoss is the mean cross entropy of logits [n, c] against I64 class
// indices [n] (torch.nn.CrossEntropyLoss; labels equal to tensor.IgnoreIndex are left
// out). Recorded, it saves the logits, the labels and a float per row.
type CrossEntropyLoss struct{}

// Loss returns the mean cross entropy of logits against labels.
func (CrossEntropyLoss) Loss(logits, labels *tensor.Tensor) *tensor.Tensor {
	return tensor.CrossEntropy(logits, labels)
}

// MSELoss is the mean squared error (torch.nn.MSELoss). Recorded, it saves both
// operands.
type MSELoss struct{}

// Loss returns the mean of (pred-target)².
func (MSELoss) Loss(pred, target *tensor.Tensor) *tensor.Tensor { return tensor.MSE(pred, target) }
