package tensor_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/gradcheck"
)

// transposed is c with every input of rank 2 or more given as the transpose of a leaf
// laid out the other way (a strided input), and the output of rank 2 or more
// transposed, so that c's op gets a strided gradient in backward.
func transposed(c gc) gc {
	shapes := make([][]int, len(c.shapes))
	for i, sh := range c.shapes {
		shapes[i] = slices.Clone(sh)
		if n := len(sh); n >= 2 {
			shapes[i][n-2], shapes[i][n-1] = sh[n-1], sh[n-2]
		}
	}
	f := c.f
	c.name += "Transposed"
	c.shapes = shapes
	c.f = func(s *tensor.Scope, x []in) in {
		y := make([]in, len(x))
		for i, t := range x {
			y[i] = t
			if t.Rank() >= 2 {
				y[i] = t.T()
			}
		}
		out := f(s, y)
		if out.Rank() >= 2 {
			out = out.T()
		}
		return out
	}
	return c
}

// Every gradient check again with strided inputs and a strided incoming gradient
// (the op's output is transposed, so its backward gets a transposed gradient).
func TestGradcheckTransposed(t *testing.T) {
	d := newCPU(t)
	var cases []gc
	for _, c := range allChecks(t, d) {
		if c.op == tensor.OpView {
			continue // it refuses a strided input
		}
		cases = append(cases, transposed(c))
	}
	runChecks(t, d, cases)
}

// halfGrads runs c's function once on inputs of dt (the values rounded to it) and
// returns each input's gradient type and values (as float64), the
// backward seeded with w rounded to the output's type.
func halfGrads(d device.Device, c gc, ins []gradcheck.Input, dt dtype.DType, seed uint64) ([]dtype.DType, [][]float64) {
	s := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(1)))
	defer s.Close()
	leaves := make([]in, len(ins))
	for i, x := range ins {
		data := make([]float64, len(x.Data))
		for j, v := range x.Data {
			data[j] = dtype.BF16.Round(dtype.F16.Round(v)) // one value for every type
		}
		leaves[i] = tensor.FromSlice(s, d, dtype.F64, data, x.Shape...).Cast(dt).Detach().SetRequiresGrad(true)
	}
	out := c.f(s, leaves)
	r := rand.New(rand.NewPCG(seed, 7))
	w := make([]float64, out.Numel())
	for k := range w {
		w[k] = dtype.BF16.Round(dtype.F16.Round(r.Float64()*2 - 1))
	}
	g := tensor.FromSlice(s, d, dtype.F64, w, out.Shape()...)
	if out.Rank() == 0 {
		g = g.Reshape()
	}
	out.BackwardWith(tensor.BackwardOptions{Grad: g.Cast(out.DType())})
	types := make([]dtype.DType, len(leaves))
	grads := make([][]float64, len(leaves))
	for i, l := range leaves {
		if l.Grad() == nil {
			continue
		}
		types[i] = l.Grad().DType()
		grads[i] = tensor.ToSlice[float64](s.Bind(l.Grad()).Cast(dtype.F64))
	}
	return types, grads
}

// The backward of every checked op in F16 and BF16 (gradcheck takes F64 and F32 only)
// gives gradients of the inputs' type that agree with float32's on the same values, to
// the 16-bit type's precision.
func TestHalfGradientsOfEveryCheckedOp(t *testing.T) {
	d := newCPU(t)
	for i, c := range allChecks(t, d) {
		for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
			t.Run(c.name+"/"+dt.String(), func(t *testing.T) {
				ins := inputs(c, uint64(i+1))
				_, want := halfGrads(d, c, ins, dtype.F32, uint64(i+1))
				types, got := halfGrads(d, c, ins, dt, uint64(i+1))
				tol := 1e-2
				if dt == dtype.BF16 {
					tol = 6e-2
				}
				for k := range want {
					if want[k] == nil {
						continue
					}
					require.Equal(t, dt, types[k], "input %d's gradient", k)
					scale := 1.0
					for _, v := range want[k] {
						scale = max(scale, math.Abs(v))
					}
					for j := range want[k] {
						require.InDelta(t, want[k][j], got[k][j], tol*scale, "input %d element %d", k, j)
					}
				}
				requireEmpty(t, d)
			})
		}
	}
}
