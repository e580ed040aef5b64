package autograd

import "errors"

// Grad runs a backward from roots restricted to inputs and returns the gradient
// that reached each input edge instead of letting it accumulate
// (torch.autograd.grad): the leaves' accumulators do not run, nodes that lead
// to no input are left as they are, and, unless opts.RetainGraph, the nodes
// that ran are consumed as by Backward. The caller owns the returned values;
// an input no gradient reached gets nil. Each edge must appear once. Grad
// sets opts.Inputs and opts.Capture; the rest of opts is Backward's.
func Grad(roots []Root, inputs []Edge, opts Options) ([]Value, error) {
	if len(inputs) == 0 {
		for _, r := range roots {
			if r.Grad != nil {
				r.Grad.Release()
			}
		}
		return nil, errors.New("autograd: Grad: no inputs; name the edges whose gradients you want")
	}
	out := make([]Value, len(inputs))
	opts.Inputs = inputs
	opts.Capture = func(i int, g Value) error {
		out[i] = g
		return nil
	}
	if err := Backward(roots, opts); err != nil {
		releaseAll(out)
		return nil, err
	}
	return out, nil
}
