package tensor

import (
	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// Op names of the comparisons and the selections.
const (
	OpEq         = "Eq"
	OpNe         = "Ne"
	OpLt         = "Lt"
	OpLe         = "Le"
	OpGt         = "Gt"
	OpGe         = "Ge"
	OpWhere      = "Where"
	OpMaskedFill = "MaskedFill"
)

// The comparisons' rows, by kernel.
var compareOps = [...]*OpInfo{
	kernels.Eq: {Name: OpEq, MinInputs: 1, MaxInputs: 2, Saves: "nothing (it records no node)"},
	kernels.Ne: {Name: OpNe, MinInputs: 1, MaxInputs: 2, Saves: "nothing (it records no node)"},
	kernels.Lt: {Name: OpLt, MinInputs: 1, MaxInputs: 2, Saves: "nothing (it records no node)"},
	kernels.Le: {Name: OpLe, MinInputs: 1, MaxInputs: 2, Saves: "nothing (it records no node)"},
	kernels.Gt: {Name: OpGt, MinInputs: 1, MaxInputs: 2, Saves: "nothing (it records no node)"},
	kernels.Ge: {Name: OpGe, MinInputs: 1, MaxInputs: 2, Saves: "nothing (it records no node)"},
}

var (
	opWhere      = &OpInfo{Name: OpWhere, MinInputs: 3, MaxInputs: 3, Saves: "the condition"}
	opMaskedFill = &OpInfo{Name: OpMaskedFill, MinInputs: 2, MaxInputs: 2, Saves: "the mask"}
)

// Eq returns a == b elementwise as a Bool tensor, broadcasting (torch.eq, a == b).
// a and b may be of any types, compared as PyTorch compares them: integers and Bool
// exactly, otherwise in the type they promote to, each value rounded to it once
// (kernels.CompareType). NaN equals nothing. A comparison records no gradient.
func (a *Tensor) Eq(b *Tensor) *Tensor { return compareOp(kernels.Eq, a, b) }

// Ne returns a != b elementwise as a Bool tensor, broadcasting (true for NaN).
func (a *Tensor) Ne(b *Tensor) *Tensor { return compareOp(kernels.Ne, a, b) }

// Lt returns a < b elementwise as a Bool tensor, broadcasting.
func (a *Tensor) Lt(b *Tensor) *Tensor { return compareOp(kernels.Lt, a, b) }

// Le returns a <= b elementwise as a Bool tensor, broadcasting.
func (a *Tensor) Le(b *Tensor) *Tensor { return compareOp(kernels.Le, a, b) }

// Gt returns a > b elementwise as a Bool tensor, broadcasting.
func (a *Tensor) Gt(b *Tensor) *Tensor { return compareOp(kernels.Gt, a, b) }

// Ge returns a >= b elementwise as a Bool tensor, broadcasting.
func (a *Tensor) Ge(b *Tensor) *Tensor { return compareOp(kernels.Ge, a, b) }

// EqScalar returns t == v elementwise as a Bool tensor (t == 0.5 in PyTorch): v is
// rounded to t's floating type, or compared exactly with an integer or Bool t when v
// is an integer (in F32 when it is not), as PyTorch converts a Python number.
func (t *Tensor) EqScalar(v float64) *Tensor { return compareScalar(kernels.Eq, t, v) }

// NeScalar returns t != v elementwise as a Bool tensor (see EqScalar).
func (t *Tensor) NeScalar(v float64) *Tensor { return compareScalar(kernels.Ne, t, v) }

// LtScalar returns t < v elementwise as a Bool tensor (see EqScalar).
func (t *Tensor) LtScalar(v float64) *Tensor { return compareScalar(kernels.Lt, t, v) }

// LeScalar returns t <= v elementwise as a Bool tensor (see EqScalar).
func (t *Tensor) LeScalar(v float64) *Tensor { return compareScalar(kernels.Le, t, v) }

// GtScalar returns t > v elementwise as a Bool tensor (see EqScalar).
func (t *Tensor) GtScalar(v float64) *Tensor { return compareScalar(kernels.Gt, t, v) }

// GeScalar returns t >= v elementwise as a Bool tensor (see EqScalar).
func (t *Tensor) GeScalar(v float64) *Tensor { return compareScalar(kernels.Ge, t, v) }

func compareOp(k kernels.CompareOp, a, b *Tensor) *Tensor {
	c := begin(compareOps[k].Name, a, b)
	x, y := c.in[0], c.in[1]
	shape, ok := broadcast(x.shape, y.shape)
	if !ok {
		c.bad(ErrShape, "shapes do not broadcast")
	}
	out := c.alloc(dtype.Bool, shape)
	c.k.Compare(k, out.operand(), x.operand(), y.operand())
	return c.done(out)
}

func compareScalar(k kernels.CompareOp, t *Tensor, v float64) *Tensor {
	c := begin(compareOps[k].Name, t)
	x := c.in[0]
	out := c.alloc(dtype.Bool, x.shape)
	c.k.Compare(k, out.operand(), x.operand(), kernels.Scalar(v))
	return c.done(out)
}

// Where returns a where the Bool cond is true and b where it is false, elementwise,
// the three broadcast (torch.where(cond, a, b)); the result has the type a and b
// promote to. Recorded, it saves cond: a's gradient is g where cond is true, b's
// where it is false (0 elsewhere), each summed to its input's shape.
func Where(cond, a, b *Tensor) *Tensor {
	c := begin(OpWhere, cond, a, b)
	m, x, y := c.in[0], c.in[1], c.in[2]
	c.requireMask(m)
	shape, ok := broadcast(m.shape, x.shape)
	if ok {
		shape, ok = broadcast(shape, y.shape)
	}
	if !ok {
		c.bad(ErrShape, "shapes do not broadcast")
	}
	out := c.alloc(dtype.Promote(x.dt, y.dt), shape)
	c.k.Where(out.operand(), m.operand(), x.operand(), y.operand())
	if c.recording() {
		r := recordRule(c, whereBackward{}, out)
		r.cond = c.save(m)
	}
	return c.done(out)
}

// MaskedFill returns t with v where the Bool mask is true (torch.masked_fill): mask
// broadcasts to t's shape, the result has t's type and shape, and v is a constant of
// it (rounded for a floating t, an exact value for an integer one). Recorded, it saves
// the mask: t's gradient is g where the mask is false, 0 where it is true.
func (t *Tensor) MaskedFill(mask *Tensor, v float64) *Tensor {
	c := begin(OpMaskedFill, t, mask)
	x, m := c.in[0], c.in[1]
	c.requireMask(m)
	if !broadcastsTo(m.shape, x.shape) {
		c.bad(ErrShape, "the mask's shape %v does not broadcast to the tensor's %v", m.shape, x.shape)
	}
	vt := x.dt
	if vt.IsFloat() {
		vt = opType(vt)
	}
	if why := badConstant(v, vt); why != "" {
		c.bad(ErrDType, "%s", why)
	}
	out := c.alloc(x.dt, x.shape)
	c.k.Where(out.operand(), m.operand(), kernels.Scalar(v), x.operand())
	if c.recording() {
		r := recordRule(c, whereBackward{filled: true}, out)
		r.cond = c.save(m)
	}
	return c.done(out)
}

// requireMask fails the op unless m is a Bool tensor (PyTorch's condition and mask).
func (c *call) requireMask(m *Tensor) {
	if m.dt != dtype.Bool {
		c.bad(ErrDType, "the condition is %v; it must be Bool (compare, or Cast it)", m.dt)
	}
}

// whereBackward routes g by the saved condition: for Where to a where it holds and
// to b where it does not; for MaskedFill (filled) to t where it does not.
type whereBackward struct {
	cond   *autograd.Saved
	filled bool
}

func (r *whereBackward) backward(b *bwd) {
	g, cond := b.g, b.saved(r.cond)
	zero := kernels.Scalar(0)
	pick := func(taken bool) *Tensor {
		return gradKernel("where backward", g, []*Tensor{cond}, func(k kernels.Backend, dst kernels.Operand) {
			if taken {
				k.Where(dst, cond.operand(), g.operand(), zero)
			} else {
				k.Where(dst, cond.operand(), zero, g.operand())
			}
		})
	}
	if r.filled {
		if b.needs(0) {
			b.set(0, pick(false))
		}
		return
	}
	if b.needs(1) {
		b.set(1, pick(true))
	}
	if b.needs(2) {
		b.set(2, pick(false))
	}
}
