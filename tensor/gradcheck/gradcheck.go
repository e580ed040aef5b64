// Package gradcheck checks the gradients an op's backward rule computes against
// central finite differences.
//
//	err := gradcheck.Check(dev, func(s *tensor.Scope, in []*tensor.Tensor) *tensor.Tensor {
//		return in[0].Tanh().Mul(in[1])
//	}, []gradcheck.Input{{Shape: []int{2, 3}, Data: a}, {Shape: []int{2, 3}, Data: b}}, gradcheck.Options{})
//
// err is nil when every element agrees, else it lists those that do not.
//
// The inputs are F64 by default, as PyTorch's gradcheck wants double inputs: the op
// runs in float64 on the device given (cpu, or sim with a backing store) and the
// default tolerances are PyTorch's (eps 1e-6, atol 1e-5, rtol 1e-3). Options.DType F32
// runs the op in float32 with looser defaults (eps 1e-2, atol 1e-3, rtol 1e-2). The
// inputs' values are rounded to that type first (explicitly: FromSlice takes only
// exact values), the perturbation and the reduction to a scalar are done in float64
// on the host, and the difference quotient divides by the perturbation the inputs
// really got. A fixed random projection w (rounded to the output's type) turns the
// output into the scalar L = Σ out·w, so every output element takes part; backward is
// seeded with w.
//
// Invariant: Check releases everything it made, also when f panics with a
// *tensor.Error (the panic goes on).
//
//doccheck:context var a, b []float64
package gradcheck

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// Input is one differentiable input of the checked function.
type Input struct {
	Shape []int
	Data  []float64 // row-major, len = the shape's element count
}

// Options tune a check; zero fields take the defaults, which depend on DType.
type Options struct {
	// DType is the type of the inputs: dtype.F64 (the default) or dtype.F32.
	DType dtype.DType
	// Eps is the perturbation (default 1e-6 for F64, as PyTorch's; 1e-2 for F32,
	// where round-off over a smaller step would swamp the difference).
	Eps float64
	// An element passes when |analytic − numeric| ≤ Atol + Rtol·|numeric| (defaults
	// 1e-5 and 1e-3 for F64, as PyTorch's; 1e-3 and 1e-2 for F32).
	Atol, Rtol float64
	// Seed picks the projection w and the generator f's scope draws from (default 1).
	Seed uint64
}

// defaults fills the zero fields of o.
func (o *Options) defaults() error {
	eps, atol, rtol := 1e-6, 1e-5, 1e-3
	switch o.DType {
	case dtype.Invalid:
		o.DType = dtype.F64
	case dtype.F64:
	case dtype.F32:
		eps, atol, rtol = 1e-2, 1e-3, 1e-2
	default:
		return fmt.Errorf("gradcheck: inputs of %v: use dtype.F64 (the default) or dtype.F32", o.DType)
	}
	if o.Eps == 0 {
		o.Eps = eps
	}
	if o.Atol == 0 {
		o.Atol = atol
	}
	if o.Rtol == 0 {
		o.Rtol = rtol
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	return nil
}

// Func computes the checked output from the inputs, in scope s (its child scope for
// one evaluation). Its random ops draw from s's generator, reset to the same state
// before every evaluation, so dropout masks repeat.
type Func func(s *tensor.Scope, in []*tensor.Tensor) *tensor.Tensor

// Check compares, for every element of every input, the gradient backward gives with
// the central difference, and returns an error listing the elements that differ.
func Check(dev device.Device, f Func, inputs []Input, o Options) error {
	if err := o.defaults(); err != nil {
		return err
	}
	dt := o.DType
	inputs = append([]Input(nil), inputs...)
	for i, in := range inputs {
		n := 1
		for _, d := range in.Shape {
			n *= d
		}
		if n != len(in.Data) {
			return fmt.Errorf("gradcheck: input %d: %d values for shape %v", i, len(in.Data), in.Shape)
		}
		inputs[i].Data = make([]float64, n)
		for j, x := range in.Data {
			inputs[i].Data[j] = dt.Round(x)
		}
	}
	gen := tensor.NewGenerator(o.Seed)
	state := gen.State()
	root := tensor.NewScope(tensor.WithGenerator(gen))
	defer root.Close()

	analytic, w := backward(root, dev, dt, f, inputs, gen, state, o.Seed)
	var bad []string
	for i, in := range inputs {
		data := append([]float64(nil), in.Data...)
		for j, x := range in.Data {
			hi, lo := dt.Round(x+o.Eps), dt.Round(x-o.Eps)
			data[j] = hi
			lp := evaluate(root, dev, dt, f, inputs, i, data, w, gen, state)
			data[j] = lo
			lm := evaluate(root, dev, dt, f, inputs, i, data, w, gen, state)
			data[j] = x
			numeric := (lp - lm) / (hi - lo)
			a := analytic[i][j]
			if !(math.Abs(a-numeric) <= o.Atol+o.Rtol*math.Abs(numeric)) {
				bad = append(bad, fmt.Sprintf("input %d element %d (x=%g): backward %.6g, finite difference %.6g", i, j, x, a, numeric))
			}
		}
	}
	if len(bad) > 0 {
		return errors.New("gradcheck: gradients differ:\n  " + strings.Join(bad, "\n  "))
	}
	return nil
}

// backward runs f once with grad and returns the inputs' gradients and the projection.
func backward(root *tensor.Scope, dev device.Device, dt dtype.DType, f Func, inputs []Input, gen *tensor.Generator, state tensor.GeneratorState, seed uint64) ([][]float64, []float64) {
	s := root.Child()
	defer s.Close()
	leaves := make([]*tensor.Tensor, len(inputs))
	for i, in := range inputs {
		leaves[i] = tensor.FromSlice(s, dev, dt, in.Data, in.Shape...).SetRequiresGrad(true)
	}
	gen.Restore(state)
	out := f(s, leaves)
	r := rand.New(rand.NewPCG(seed, 7))
	w := make([]float64, out.Numel())
	for k := range w {
		w[k] = out.DType().Round(r.Float64()*2 - 1)
	}
	grad := tensor.FromSlice(s, dev, out.DType(), w, out.Shape()...)
	if out.Rank() == 0 {
		grad = grad.Reshape() // FromSlice makes a 1-D tensor when given no shape
	}
	out.BackwardWith(tensor.BackwardOptions{Grad: grad})
	grads := make([][]float64, len(inputs))
	for i, l := range leaves {
		if g := l.Grad(); g != nil {
			grads[i] = tensor.ToSlice[float64](g)
		} else {
			grads[i] = make([]float64, len(inputs[i].Data))
		}
	}
	return grads, w
}

// evaluate returns Σ f(inputs)·w in float64, input i replaced by data, without grad.
func evaluate(root *tensor.Scope, dev device.Device, dt dtype.DType, f Func, inputs []Input, i int, data, w []float64, gen *tensor.Generator, state tensor.GeneratorState) float64 {
	s := root.Child(tensor.NoGrad())
	defer s.Close()
	in := make([]*tensor.Tensor, len(inputs))
	for k, x := range inputs {
		d := x.Data
		if k == i {
			d = data
		}
		in[k] = tensor.FromSlice(s, dev, dt, d, x.Shape...)
	}
	gen.Restore(state)
	out := tensor.ToSlice[float64](f(s, in))
	l := 0.0
	for k, v := range out {
		l += v * w[k]
	}
	return l
}
