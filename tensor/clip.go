package tensor

import (
	"math"

	"github.com/subletml/sublet/kernels"
)

// ScaleBy multiplies t by x (broadcast to t's shape, any floating type), in place:
// Scale by a factor that lives on the device (gradient clipping's coefficient), so the
// program never waits to read it. See the in-place ops in inplace.go.
func (t *Tensor) ScaleBy(x *Tensor) {
	const op = "ScaleBy"
	t.live(op)
	x.live(op)
	if !t.dt.IsFloat() || !x.dt.IsFloat() {
		fail(op, ErrDType, []*Tensor{t, x}, "takes floating tensors")
	}
	k := t.inPlace(op, x)
	o := t.operand()
	k.Binary(kernels.Mul, o, o, x.operand())
}

// ClampInPlace sets each element of t below lo to lo and above hi to hi, in place
// (torch.clamp_); a NaN stays NaN. lo ≤ hi, either may be infinite.
func (t *Tensor) ClampInPlace(lo, hi float64) {
	const op = "ClampInPlace"
	if !(lo <= hi) {
		fail(op, ErrShape, []*Tensor{t}, "bounds [%g, %g]: need lo ≤ hi", lo, hi)
	}
	t.live(op)
	if !t.dt.IsFloat() {
		fail(op, ErrDType, []*Tensor{t}, "takes a floating tensor")
	}
	k := t.inPlace(op)
	o := t.operand()
	if !math.IsInf(lo, -1) {
		k.Binary(kernels.Maximum, o, o, kernels.Scalar(lo))
	}
	if !math.IsInf(hi, 1) {
		k.Binary(kernels.Minimum, o, o, kernels.Scalar(hi))
	}
}
