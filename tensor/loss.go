package tensor

import (
	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/dtype"
)

// IgnoreIndex is the label CrossEntropy leaves out of the loss (PyTorch's default).
const IgnoreIndex = -100

// CrossEntropy returns the mean over the rows of logits [n, c] whose label (I64 labels
// [n]) is not IgnoreIndex of -log softmax(logits[i])[labels[i]]: a scalar. A label
// outside [0, c) is an ErrIndex error naming it. It saves the logits, the labels and
// one log-sum-exp per row (and the count of rows that count beside them).
func CrossEntropy(logits, labels *Tensor) *Tensor {
	c := begin(OpCrossEntropy, logits, labels)
	x, l := c.in[0], c.in[1]
	if !x.dt.IsFloat() || l.dt != dtype.I64 {
		c.bad(ErrDType, "CrossEntropy takes floating logits and I64 labels")
	}
	if len(x.shape) != 2 || len(l.shape) != 1 || l.shape[0] != x.shape[0] {
		c.bad(ErrShape, "CrossEntropy takes logits [n, c] and labels [n]")
	}
	n, k := x.shape[0], x.shape[1]
	out := c.alloc(x.dt, nil)
	// lse holds each row's log-sum-exp and then the count of rows that count, which
	// the backward divides by. Contiguous F16 or BF16 logits go to the kernel as they
	// are (rowStore), computed in float32.
	lse := c.alloc(c.rowType(), []int{n + 1})
	xs := c.denseAs(x, c.rowStore(x))
	if err := c.k.CrossEntropy(out.operand(), lse.operand(), xs.operand(), c.dense64(l).operand(), n, k, IgnoreIndex); err != nil {
		c.bad(indexError{err}, "a label is not a class index of the logits' %d classes", k)
	}
	if c.recording() {
		r := recordRule(c, crossEntropyBackward{n: n, k: k}, out)
		r.x, r.labels, r.lse = c.save(x), c.save(l), c.save(lse)
	}
	c.temp(lse)
	return c.done(out)
}

// dense64 returns an I64 tensor contiguous: t itself or a copy released with the op.
func (c *call) dense64(t *Tensor) *Tensor {
	if t.IsContiguous() {
		return t
	}
	d := c.alloc(dtype.I64, t.shape)
	c.scratch = append(c.scratch, d)
	c.k.Copy(d.operand(), t.operand())
	return d
}

type crossEntropyBackward struct {
	n, k           int
	x, labels, lse *autograd.Saved
}

func (r *crossEntropyBackward) backward(b *bwd) {
	g, x, l, lse := b.g, b.saved(r.x), b.saved(r.labels), b.saved(r.lse)
	c := begin("cross entropy backward", g, x, l, lse)
	dx := c.alloc(x.dt, x.shape)
	st := c.rowStore(dx, x)
	buf := c.denseOutAs(dx, st)
	c.k.CrossEntropyBackward(buf.operand(), c.denseAs(x, st).operand(), c.dense(lse).operand(), c.dense64(l).operand(),
		g.operand(), r.n, r.k, IgnoreIndex)
	c.flush(dx, buf)
	b.set(0, c.done(dx))
}

// MSE returns the mean of (a-b)² over all elements of a and b (same shape): a scalar.
// It saves a and b.
func MSE(a, b *Tensor) *Tensor {
	c := begin(OpMSE, a, b)
	c.floatOnly()
	x, y := c.in[0], c.in[1]
	if !sameShape(x.shape, y.shape) {
		c.bad(ErrShape, "MSE takes two tensors of one shape")
	}
	out := c.alloc(dtype.Promote(x.dt, y.dt), nil)
	c.k.MSE(out.operand(), c.dense(x).operand(), c.dense(y).operand())
	if c.recording() {
		r := recordRule(c, mseBackward{}, out)
		r.a, r.b = c.save(x), c.save(y)
	}
	return c.done(out)
}

type mseBackward struct{ a, b *autograd.Saved }

func (r *mseBackward) backward(b *bwd) {
	g, x, y := b.g, b.saved(r.a), b.saved(r.b)
	c := begin("mse backward", g, x, y)
	var da, db *Tensor
	if b.needs(0) {
		da = c.alloc(x.dt, x.shape)
	}
	if b.needs(1) {
		db = c.alloc(y.dt, y.shape)
	}
	bufA, bufB := c.denseOut(da), c.denseOut(db)
	c.k.MSEBackward(bufA.operand(), bufB.operand(), c.dense(x).operand(), c.dense(y).operand(), g.operand())
	c.flush(da, bufA)
	c.flush(db, bufB)
	c.done(nil)
	b.set(0, da)
	b.set(1, db)
}
