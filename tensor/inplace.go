package tensor

import (
	"github.com/subletml/sublet/kernels/cpu"
)

// The in-place ops below write into t's storage and bump its version (a saved tensor
// that changed fails the backward that reads it). They record nothing: they are for
// initialization, optimizer updates and gradient clipping, and refuse a tensor a
// recorded op produced. They need no scope.

// inPlace checks t can be written by op and reports whether the kernels run.
func (t *Tensor) inPlace(op string, others ...*Tensor) bool {
	t.live(op)
	all := append([]*Tensor{t}, others...)
	if t.node != nil {
		fail(op, ErrGrad, all, "an in-place op on the output of %s would break its gradient; work on a Detach()ed handle or a copy", t.node.Name())
	}
	if !hostCapable(t.st.dev) {
		fail(op, ErrNoKernels, all, "%s has no kernels yet", t.st.dev.Name())
	}
	compute := t.st.host != nil && t.Numel() > 0
	for _, o := range others {
		o.live(op)
		if o.st.dev != t.st.dev {
			fail(op, ErrDevice, all, "inputs on %s and %s", t.st.dev.Name(), o.st.dev.Name())
		}
		if !broadcastsTo(o.shape, t.shape) {
			fail(op, ErrShape, all, "%v does not broadcast to %v", o.shape, t.shape)
		}
		compute = compute && o.st.host != nil
	}
	t.st.version.Add(1)
	return compute
}

// Fill sets every element of t to v, in place.
func (t *Tensor) Fill(v float64) {
	if t.inPlace("Fill") {
		cpu.Fill(t.operand(), v)
	}
}

// CopyFrom copies src (broadcast to t's shape, converted to t's type) into t, in
// place. src must not overlap t.
func (t *Tensor) CopyFrom(src *Tensor) {
	if t.inPlace("CopyFrom", src) {
		cpu.Copy(t.operand(), src.operand())
	}
}

// AddScaled adds alpha·x (broadcast to t's shape) into t, in place: t += alpha·x.
func (t *Tensor) AddScaled(alpha float64, x *Tensor) {
	if t.inPlace("AddScaled", x) {
		cpu.Axpy(t.operand(), float32(alpha), x.operand())
	}
}

// Scale multiplies t by alpha, in place.
func (t *Tensor) Scale(alpha float64) {
	if t.inPlace("Scale") {
		o := t.operand()
		cpu.Binary(cpu.Mul, o, o, scalarOperand(alpha))
	}
}

// scalarOperand is v as a rank-0 float32 operand in Go memory.
func scalarOperand(v float64) cpu.Operand {
	return cpu.F32([]float32{float32(v)}, cpu.Layout{})
}

// FillUniform sets t's elements to values uniform in [lo, hi) drawn from g, in place
// (parameter initialization). On a device without data it draws nothing.
func (t *Tensor) FillUniform(g *Generator, lo, hi float64) {
	t.fillRandom("FillUniform", g, func(v []float32) {
		g.fillUniform(v)
		for i := range v {
			v[i] = float32(lo + float64(v[i])*(hi-lo))
		}
	})
}

// FillNormal sets t's elements to normal values of mean and std drawn from g, in
// place. On a device without data it draws nothing.
func (t *Tensor) FillNormal(g *Generator, mean, std float64) {
	t.fillRandom("FillNormal", g, func(v []float32) {
		g.fillNormal(v)
		for i := range v {
			v[i] = float32(mean + float64(v[i])*std)
		}
	})
}

func (t *Tensor) fillRandom(op string, g *Generator, draw func([]float32)) {
	t.live(op)
	if g == nil {
		fail(op, ErrScope, []*Tensor{t}, "nil generator")
	}
	if !t.dt.IsFloat() {
		fail(op, ErrDType, []*Tensor{t}, "random values need a floating tensor")
	}
	if t.inPlace(op) {
		v := make([]float32, t.Numel())
		draw(v)
		cpu.Copy(t.operand(), cpu.F32(v, cpu.Contiguous(t.shape...)))
	}
}
