package tensor

import (
	"slices"

	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/dtype"
)

// Embedding gathers rows of the table w [vocab, dim] at the I64 indices idx (any
// shape): the result is [idx shape..., dim]. An index outside [0, vocab) is an
// ErrIndex error naming it. It saves the indices only.
func Embedding(w, idx *Tensor) *Tensor {
	c := begin(OpEmbedding, w, idx)
	w, idx = c.in[0], c.in[1]
	if !w.dt.IsFloat() || idx.dt != dtype.I64 {
		c.bad(ErrDType, "Embedding takes a floating table and I64 indices")
	}
	if len(w.shape) != 2 {
		c.bad(ErrShape, "the table must be [vocab, dim]")
	}
	dim := w.shape[1]
	out := c.alloc(w.dt, append(slices.Clone(idx.shape), dim))
	buf := c.denseOut(out)
	if err := c.k.Embedding(buf.operand(), c.dense(w).operand(), c.dense64(idx).operand(), dim); err != nil {
		c.bad(indexError{err}, "an index is outside the table")
	}
	c.flush(out, buf)
	if c.recording() {
		r := recordRule(c, embeddingBackward{}, out)
		r.idx = c.save(idx)
	}
	return c.done(out)
}

type embeddingBackward struct{ idx *autograd.Saved }

func (r *embeddingBackward) backward(b *bwd) {
	if !b.needs(0) {
		return
	}
	g, idx := b.g, b.saved(r.idx)
	shape := b.f.in[0].shape
	c := begin("embedding backward", g, idx)
	dw := c.alloc(c.rowType(), shape)
	c.k.Fill(dw.operand(), 0)
	if err := c.k.EmbeddingBackward(dw.operand(), c.dense(g).operand(), c.dense64(idx).operand(), shape[1]); err != nil {
		c.bad(indexError{err}, "an index is outside the table")
	}
	b.set(0, c.done(dw))
}
