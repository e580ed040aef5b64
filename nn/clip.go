package nn

import (
	"errors"
	"fmt"
	"math"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// ErrNonFiniteNorm is wrapped by the *tensor.Error ClipGradNorm panics with when
// ClipOptions.ErrorIfNonfinite is set and the total norm is NaN or infinite (where
// PyTorch raises); tensor.Try returns it as an error:
//
//	err := tensor.Try(func() { nn.ClipGradNorm(step, ps, 1, nn.ClipOptions{ErrorIfNonfinite: true}) })
//	if errors.Is(err, nn.ErrNonFiniteNorm) { /* skip the step */ }
var ErrNonFiniteNorm = errors.New("non-finite gradient norm")

// ClipOptions tune ClipGradNorm. The zero value is PyTorch's default.
type ClipOptions struct {
	// NormType is p of the p-norm: any p > 0, math.Inf(1) for the largest magnitude,
	// math.Inf(-1) for the smallest; 0 means 2.
	NormType float64
	// ErrorIfNonfinite makes a NaN or infinite total norm fail ClipGradNorm, the
	// gradients left as they were: it panics with a *tensor.Error wrapping
	// ErrNonFiniteNorm, as PyTorch raises, which tensor.Try turns into an error.
	// Checking reads the norm back, which waits for the device: the only read
	// ClipGradNorm makes.
	ErrorIfNonfinite bool
}

const opClipGradNorm = "nn.ClipGradNorm"

// ClipGradNorm scales the gradients of params in place so that their total p-norm
// (the norm of the vector of every gradient's norm, torch.nn.utils.clip_grad_norm_)
// is at most maxNorm: each is multiplied by min(maxNorm/(total+1e-6), 1). It returns
// the total norm before clipping, a one-element tensor on the first gradient's device
// owned by s (F32; F16 and BF16 gradients are read in F32, so their squares do not
// overflow). Parameters without a gradient are skipped; with none at all the norm is
// 0.
//
// Everything is computed on the gradients' devices: nothing is read back (the program
// does not wait for the device) unless ErrorIfNonfinite asks for the check. Memory:
// while it runs, one gradient's temporaries at a time; afterwards only the norm.
// It panics with a *tensor.Error for bad arguments (no parameters, maxNorm < 0, a p
// outside its range) and, with ErrorIfNonfinite, for a non-finite norm (see
// ErrNonFiniteNorm). o is optional: ClipGradNorm(step, nn.Parameters(model), 1) is
// clip_grad_norm_(model.parameters(), 1.0).
func ClipGradNorm(s *tensor.Scope, params []*tensor.Tensor, maxNorm float64, opts ...ClipOptions) *tensor.Tensor {
	var o ClipOptions
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		panic(&tensor.Error{Op: opClipGradNorm, Msg: fmt.Sprintf("%d ClipOptions; pass one, or none for PyTorch's defaults", len(opts)), Err: tensor.ErrShape})
	}
	p := o.NormType
	if p == 0 {
		p = 2
	}
	switch {
	case len(params) == 0:
		panic(&tensor.Error{Op: opClipGradNorm, Msg: "no parameters; pass the module's (nn.Parameters)", Err: tensor.ErrShape})
	case !(maxNorm >= 0):
		panic(&tensor.Error{Op: opClipGradNorm, Msg: fmt.Sprintf("max norm %g: need a norm ≥ 0", maxNorm), Err: tensor.ErrShape})
	case !(p > 0) && !math.IsInf(p, -1):
		panic(&tensor.Error{Op: opClipGradNorm, Msg: fmt.Sprintf("norm type %g: need p > 0 or ±Inf", p), Err: tensor.ErrShape})
	}
	c := s.Child(tensor.NoGrad())
	defer c.Close()
	var grads, norms []*tensor.Tensor
	for _, q := range params {
		g := q.Grad()
		if g == nil {
			continue
		}
		grads = append(grads, g)
		if g.Numel() > 0 {
			norms = append(norms, gradNorm(c, g, p, grads[0]))
		}
	}
	if len(norms) == 0 {
		return s.Zeros(params[0].Device(), dtype.F32)
	}
	total := vectorNorm(tensor.Stack(0, norms...), p)
	if o.ErrorIfNonfinite {
		if v := total.Item(); math.IsNaN(v) || math.IsInf(v, 0) {
			panic(&tensor.Error{Op: opClipGradNorm, Msg: fmt.Sprintf("the total norm of order %g of the gradients is %g, so they "+
				"cannot be clipped; leave ErrorIfNonfinite off to scale them by it anyway", p, v), Err: ErrNonFiniteNorm})
		}
	}
	coef := c.Full(total.Device(), dtype.F32, maxNorm).Div(total.AddScalar(1e-6))
	coef.ClampInPlace(math.Inf(-1), 1)
	for _, g := range grads {
		k := coef
		if g.Device() != k.Device() {
			k = k.To(g.Device())
		}
		g.ScaleBy(k)
	}
	return c.Keep(total)
}

// gradNorm is the p-norm of the gradient g, computed in a scope of its own so that its
// temporaries go at once, moved to first's device; it belongs to c.
func gradNorm(c *tensor.Scope, g *tensor.Tensor, p float64, first *tensor.Tensor) *tensor.Tensor {
	gs := c.Child()
	defer gs.Close()
	x := gs.Bind(g).Reshape(-1)
	if x.DType().Is16() {
		x = x.Cast(dtype.F32)
	}
	n := vectorNorm(x, p)
	if n.Device() != first.Device() {
		n = n.To(first.Device())
	}
	return gs.Keep(n)
}

// vectorNorm is the p-norm of the 1-D x (torch.linalg.vector_norm).
func vectorNorm(x *tensor.Tensor, p float64) *tensor.Tensor {
	switch {
	case p == 2:
		return x.Norm()
	case p == 1:
		return x.Abs().Sum()
	case math.IsInf(p, 1):
		return x.Abs().Max(0)
	case math.IsInf(p, -1):
		return x.Abs().Neg().Max(0).Neg()
	}
	return x.Abs().PowScalar(p).Sum().PowScalar(1 / p)
}

// ClipGradValue clamps every gradient of params to [−clip, clip] in place
// (torch.nn.utils.clip_grad_value_); parameters without a gradient are skipped. It
// reads nothing back. It panics with a *tensor.Error for a clip below 0.
func ClipGradValue(params []*tensor.Tensor, clip float64) {
	if !(clip >= 0) {
		panic(&tensor.Error{Op: "nn.ClipGradValue", Msg: fmt.Sprintf("clip value %g: need a value ≥ 0", clip), Err: tensor.ErrShape})
	}
	for _, q := range params {
		if g := q.Grad(); g != nil {
			g.ClampInPlace(-clip, clip)
		}
	}
}
