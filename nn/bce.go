package nn

import "github.com/subletml/sublet/tensor"

// BCELoss is the binary cross-entropy of probabilities against targets of their shape
// (torch.nn.BCELoss): tensor.BinaryCrossEntropy. Autocast refuses it, as PyTorch does;
// give logits to BCEWithLogitsLoss instead of their sigmoid. Recorded, it saves both
// operands (and Weight).
type BCELoss struct {
	// Weight rescales each element's loss (broadcast to the prediction's shape); nil:
	// none. The caller owns it.
	Weight *tensor.Tensor
	// Reduction reduces the per-element losses; the zero value is the mean.
	Reduction tensor.Reduction
}

// Loss returns the binary cross-entropy of the probabilities pred against target.
func (l BCELoss) Loss(pred, target *tensor.Tensor) *tensor.Tensor {
	return tensor.BinaryCrossEntropy(pred, target, tensor.BCEOptions{Weight: l.Weight, Reduction: l.Reduction})
}

// BCEWithLogitsLoss is the binary cross-entropy of σ(logits) against targets of their
// shape, computed stably from the logits (torch.nn.BCEWithLogitsLoss):
// tensor.BinaryCrossEntropyWithLogits. Autocast runs it in F32. Recorded, it saves the
// logits, the targets and PosWeight (and Weight).
type BCEWithLogitsLoss struct {
	// Weight rescales each element's loss (broadcast to the logits' shape); nil: none.
	Weight *tensor.Tensor
	// PosWeight weights the positive term, one per class along the last axis say
	// (broadcast to the logits' shape); nil: none. It gets no gradient.
	PosWeight *tensor.Tensor
	// Reduction reduces the per-element losses; the zero value is the mean.
	Reduction tensor.Reduction
}

// Loss returns the binary cross-entropy of σ(logits) against target.
func (l BCEWithLogitsLoss) Loss(logits, target *tensor.Tensor) *tensor.Tensor {
	return tensor.BinaryCrossEntropyWithLogits(logits, target,
		tensor.BCEOptions{Weight: l.Weight, PosWeight: l.PosWeight, Reduction: l.Reduction})
}
