package tensor

import (
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// The fused update steps below are in-place ops for optimizers and gradient scalers
// (packages optim and amp): each is one kernel over a parameter, its gradient and its
// state, on their device, bumping the version of every tensor it writes. They record
// nothing and need no scope. Every tensor must be a contiguous tensor of the
// parameter's shape, type (F32 or F64: the type the step computes in) and device, not
// the output of a recorded op.

// StepSGD runs one step of SGD with hyper-parameters c on p from its gradient g and its
// momentum buffer buf (nil when c.Momentum is 0). first sets the buffer to the
// gradient instead of decaying it, as torch.optim.SGD does on a parameter's first step.
func StepSGD(c kernels.SGD, p, g, buf *Tensor, first bool) {
	const op = "StepSGD"
	if (buf == nil) != (c.Momentum == 0) {
		fail(op, ErrShape, []*Tensor{p, g, buf}, "a momentum buffer goes with a non-zero Momentum (%g), and only then", c.Momentum)
	}
	k := updating(op, p, g, buf)
	k.SGD(c, p.operand(), g.operand(), buf.operand(), first)
	if buf != nil {
		buf.st.BumpVersion()
	}
}

// StepAdam runs update number step (1 for the first) of Adam (AdamW when c.Decoupled)
// on p from its gradient g and the moments m and v (zero before the first step).
func StepAdam(c kernels.Adam, step int, p, g, m, v *Tensor) {
	const op = "StepAdam"
	if step < 1 {
		fail(op, ErrShape, []*Tensor{p, g, m, v}, "step %d: steps are numbered from 1", step)
	}
	adamNotCaptured(op, p)
	k := updating(op, p, g, m, v)
	k.Adam(c, step, p.operand(), g.operand(), m.operand(), v.operand())
	m.st.BumpVersion()
	v.st.BumpVersion()
}

// Unscale multiplies the floating gradient g by inv in place and sets found, a
// one-element F32 tensor on g's device, to 1 when g held an Inf or a NaN (leaving it as
// it was otherwise): the gradient scaler's unscale and inf check in one pass. Reading
// found (Item) waits for the device.
func Unscale(g *Tensor, inv float64, found *Tensor) {
	const op = "Unscale"
	ins := []*Tensor{g, found}
	g.live(op)
	found.live(op)
	if !g.dt.IsFloat() || found.dt != dtype.F32 || found.Numel() != 1 {
		fail(op, ErrDType, ins, "takes a floating gradient and a one-element F32 flag")
	}
	if g.st.dev != found.st.dev {
		fail(op, ErrDevice, ins, "the gradient is on %s, the flag on %s", g.st.dev.Name(), found.st.dev.Name())
	}
	k := kernelsFor(op, g.st.dev, ins)
	k.Unscale(g.operand(), inv, found.operand())
	g.st.BumpVersion()
	found.st.BumpVersion()
}

// updating checks the tensors of a fused step (p first; nil ones left out) and returns
// the kernels of p's device; p's version is bumped.
func updating(op string, p *Tensor, others ...*Tensor) kernels.Backend {
	var room [4]*Tensor
	all := append(room[:0], p)
	for _, t := range others {
		if t != nil {
			all = append(all, t)
		}
	}
	for _, t := range all {
		t.live(op)
	}
	for _, t := range all {
		switch {
		case t.node != nil:
			fail(op, ErrGrad, all, "an in-place step on the output of %s would break its gradient", t.node.Name())
		case p.dt != dtype.F32 && p.dt != dtype.F64:
			fail(op, ErrDType, all, "a step updates F32 or F64 parameters, not %v", p.dt)
		case t.dt != p.dt || !t.IsContiguous():
			fail(op, ErrDType, all, "every tensor of a step must be contiguous and of the parameter's type %v; one is %v with strides %v",
				p.dt, t.dt, t.strides)
		case !sameShape(t.shape, p.shape):
			fail(op, ErrShape, all, "every tensor of a step must have the parameter's shape %v", p.shape)
		case t.st.dev != p.st.dev:
			fail(op, ErrDevice, all, "the parameter is on %s, another tensor of its step on %s", p.st.dev.Name(), t.st.dev.Name())
		}
	}
	k := kernelsFor(op, p.st.dev, all)
	p.st.BumpVersion()
	return k
}

// adamNotCaptured fails op when a graph capture is underway on p's device: Adam's bias
// correction comes from the step count on the host, which a replay would repeat.
func adamNotCaptured(op string, p *Tensor) {
	if err := notCapturing(p.st.dev, "Adam's step, whose bias correction comes from the step count on the host (every replay would repeat this step's; "+
		"StepAdamMultiCapturable, optim.AdamConfig's Capturable, keeps the counts on the device)"); err != nil {
		fail(op, err, []*Tensor{p}, "")
	}
}
