package tensor

import (
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// The in-place ops below write into t's storage and bump its version (a saved tensor
// that changed fails the backward that reads it). They record nothing: they are for
// initialization, optimizer updates and gradient clipping, and refuse a tensor a
// recorded op produced. They need no scope.

// inPlace checks t can be written by op with the others (which broadcast to t) and
// returns the kernels of t's device.
func (t *Tensor) inPlace(op string, others ...*Tensor) kernels.Backend {
	t.live(op)
	var room [4]*Tensor
	all := append(append(room[:0], t), others...)
	if t.node != nil {
		fail(op, ErrGrad, all, "an in-place op on the output of %s would break its gradient; work on a Detach()ed handle or a copy", t.node.Name())
	}
	k := kernelsFor(op, t.st.dev, all)
	for _, o := range others {
		o.live(op)
		if o.st.dev != t.st.dev {
			fail(op, ErrDevice, all, "inputs on %s and %s", t.st.dev.Name(), o.st.dev.Name())
		}
		if !broadcastsTo(o.shape, t.shape) {
			fail(op, ErrShape, all, "%v does not broadcast to %v", o.shape, t.shape)
		}
	}
	t.st.BumpVersion()
	return k
}

// Fill sets every element of t to v, in place: a constant, as for Scope.Full.
func (t *Tensor) Fill(v float64) {
	t.live("Fill")
	checkConstant("Fill", v, t.dt, []*Tensor{t})
	t.inPlace("Fill").Fill(t.operand(), v)
}

// CopyFrom copies src (broadcast to t's shape, converted to t's type) into t, in
// place. src must not overlap t.
func (t *Tensor) CopyFrom(src *Tensor) {
	t.inPlace("CopyFrom", src).Copy(t.operand(), src.operand())
}

// AddScaled adds alpha·x (broadcast to t's shape) into t, in place: t += alpha·x,
// alpha a constant of the type the op computes in (float64 for F64, else float32).
func (t *Tensor) AddScaled(alpha float64, x *Tensor) {
	t.live("AddScaled")
	x.live("AddScaled")
	checkConstant("AddScaled", alpha, opType(dtype.Promote(t.dt, x.dt)), []*Tensor{t, x})
	t.inPlace("AddScaled", x).Axpy(t.operand(), alpha, x.operand())
}

// Scale multiplies t by alpha, in place, alpha a constant of the type the op computes
// in (float64 for F64, else float32).
func (t *Tensor) Scale(alpha float64) {
	t.live("Scale")
	checkConstant("Scale", alpha, opType(t.dt), []*Tensor{t})
	o := t.operand()
	t.inPlace("Scale").Binary(kernels.Mul, o, o, kernels.Scalar(alpha))
}

// FillUniform sets t's elements to values uniform in [lo, hi) drawn from g, in place
// (parameter initialization), in float64 for F64 and float32 otherwise. On a device
// without data it draws nothing.
func (t *Tensor) FillUniform(g *Generator, lo, hi float64) {
	t.fillRandom("FillUniform", g, false, lo, hi-lo)
}

// FillNormal sets t's elements to normal values of mean and std drawn from g, in
// place, in float64 for F64 and float32 otherwise. On a device without data it draws
// nothing.
func (t *Tensor) FillNormal(g *Generator, mean, std float64) {
	t.fillRandom("FillNormal", g, true, mean, std)
}

func (t *Tensor) fillRandom(op string, g *Generator, normal bool, shift, scale float64) {
	t.live(op)
	if g == nil {
		fail(op, ErrScope, []*Tensor{t}, "nil generator")
	}
	if !t.dt.IsFloat() {
		fail(op, ErrDType, []*Tensor{t}, "random values need a floating tensor")
	}
	err := storeRandom(t, t.inPlace(op), g, normal, shift, scale)
	if err != nil {
		fail(op, err, []*Tensor{t}, "copying %d bytes to %s", t.Bytes(), t.st.dev.Name())
	}
}
