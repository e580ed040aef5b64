package nn

import "github.com/subletml/sublet/tensor"

// Dropout zeroes each element with probability P and scales the others by 1/(1-P) in
// training mode, drawing the mask from the scope's generator (tensor.WithGenerator);
// in evaluation mode it is the identity. Recorded, it saves the mask (a byte per
// element).
type Dropout struct {
	P        float64
	training bool
}

// NewDropout returns a Dropout of probability p, in training mode.
func NewDropout(p float64) *Dropout { return &Dropout{P: p, training: true} }

// Forward returns x with dropout applied in training mode, x itself otherwise.
func (d *Dropout) Forward(x *tensor.Tensor) *tensor.Tensor {
	if !d.training || d.P == 0 {
		return x
	}
	return x.Dropout(d.P)
}

// NamedParameters returns none.
func (d *Dropout) NamedParameters() []Parameter { return nil }

// SetTraining switches dropout on (training) or off (evaluation).
func (d *Dropout) SetTraining(on bool) { d.training = on }

// Release does nothing: Dropout holds no memory.
func (d *Dropout) Release() {}
