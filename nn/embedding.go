package nn

import "github.com/subletml/sublet/tensor"

// Embedding maps I64 indices to rows of Weight [vocab, dim] (torch.nn.Embedding).
// Recorded, it saves the indices only.
type Embedding struct {
	Weight *tensor.Tensor
}

// NewEmbedding returns an Embedding of vocab rows of dim features, drawn standard
// normal from init.Gen as PyTorch does.
func NewEmbedding(init Init, vocab, dim int) *Embedding {
	g := init.generator("nn.Embedding")
	return &Embedding{Weight: init.parameter("nn.Embedding", func(t *tensor.Tensor) { t.FillNormal(g, 0, 1) }, vocab, dim)}
}

// Forward returns the rows at idx (I64, any shape): [idx shape..., dim].
func (e *Embedding) Forward(idx *tensor.Tensor) *tensor.Tensor {
	return tensor.Embedding(e.Weight, idx)
}

// NamedParameters returns "weight".
func (e *Embedding) NamedParameters() []Parameter { return []Parameter{{"weight", e.Weight}} }

// SetTraining does nothing: Embedding is the same in both modes.
func (e *Embedding) SetTraining(bool) {}

// Release releases the weight and its gradient.
func (e *Embedding) Release() { releaseAll(e.Weight) }
