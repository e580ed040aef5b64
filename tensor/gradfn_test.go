package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// Grad returns d/dx and d/dw of Σ(x·x + w·x) = 2x + w and x, accumulates nothing,
// releases what the graph saved, and its results belong to the scope.
func TestGradReturnsGradients(t *testing.T) {
	for _, dev := range dataDevices(t) {
		t.Run(dev.Name, func(t *testing.T) {
			d := dev.Device
			s := tensor.NewScope()
			x := f32(s, d, []float32{1, -2, 3}, 3).SetRequiresGrad(true)
			w := f32(s, d, []float32{0.5, 4, -1}, 3).SetRequiresGrad(true)
			xx, wx := x.Mul(x), w.Mul(x)
			sum := xx.Add(wx)
			y := sum.Sum()
			g := tensor.Grad([]*tensor.Tensor{y}, []*tensor.Tensor{x, w}, tensor.GradOptions{})
			require.Equal(t, []float32{2.5, 0, 5}, vals(g[0]))
			require.Equal(t, []float32{1, -2, 3}, vals(g[1]))
			require.Nil(t, x.Grad(), "nothing accumulated")
			require.Nil(t, w.Grad())
			require.Same(t, s, g[0].Scope())
			tensortest.RequireLive(t, d, "after Grad", tensortest.Sizes(x, w, xx, wx, sum, y, g[0], g[1])...)
			requireOpError(t, "Grad", tensor.ErrGrad, func() {
				tensor.Grad([]*tensor.Tensor{y}, []*tensor.Tensor{x}, tensor.GradOptions{})
			})
			s.Close()
			requireEmpty(t, d)
		})
	}
}

// The gradient of a non-leaf is taken where it is made: the op that made it does not
// run, and a later Grad through it still can.
func TestGradOfANonLeaf(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f32(s, d, []float32{0, 1}, 2).SetRequiresGrad(true)
	h := x.Exp()
	y := h.Mul(h).Sum()
	g := tensor.Grad([]*tensor.Tensor{y}, []*tensor.Tensor{h, h}, tensor.GradOptions{})
	want := []float64{2, 2 * math.E}
	require.InDeltaSlice(t, want, vals64(g[0]), 1e-6)
	require.InDeltaSlice(t, want, vals64(g[1]), 1e-6, "an input given twice gets its gradient twice")
	require.NotSame(t, g[0], g[1])
	gx := tensor.Grad([]*tensor.Tensor{h.Sum()}, []*tensor.Tensor{x}, tensor.GradOptions{})[0]
	require.InDeltaSlice(t, []float64{1, math.E}, vals64(gx), 1e-6, "Exp kept what it saved")
	s.Close()
	requireEmpty(t, d)
}

func TestGradOptions(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f32(s, d, []float32{1, 2}, 2).SetRequiresGrad(true)
	unused := s.Ones(d, dtype.F32, 3).SetRequiresGrad(true)
	y1, y2 := x.MulScalar(3), x.Mul(x).Sum()
	outs := []*tensor.Tensor{y1, y2}
	o := tensor.GradOptions{GradOutputs: []*tensor.Tensor{f32(s, d, []float32{1, -1}, 2), nil}, RetainGraph: true}
	g := tensor.Grad(outs, []*tensor.Tensor{x}, o)
	require.Equal(t, []float32{3 + 2, -3 + 4}, vals(g[0]), "the weighted sum of both outputs' gradients")
	requireOpError(t, "Grad", tensor.ErrGrad, func() {
		tensor.Grad([]*tensor.Tensor{y2}, []*tensor.Tensor{x, unused}, tensor.GradOptions{RetainGraph: true})
	})
	g = tensor.Grad([]*tensor.Tensor{y2}, []*tensor.Tensor{unused, x}, tensor.GradOptions{RetainGraph: true, AllowUnused: true})
	require.Nil(t, g[0])
	require.Equal(t, []float32{2, 4}, vals(g[1]))
	g = tensor.Grad([]*tensor.Tensor{y2}, []*tensor.Tensor{unused}, tensor.GradOptions{MaterializeGrads: true})
	require.Equal(t, []float32{0, 0, 0}, vals(g[0]))
	requireOpError(t, "Grad", tensor.ErrGrad, func() {
		tensor.Grad([]*tensor.Tensor{y2}, []*tensor.Tensor{s.Ones(d, dtype.F32, 1)}, tensor.GradOptions{})
	})
	requireOpError(t, "Grad", tensor.ErrGrad, func() {
		tensor.Grad([]*tensor.Tensor{s.Ones(d, dtype.F32, 1)}, []*tensor.Tensor{x}, tensor.GradOptions{})
	})
	requireOpError(t, "Grad", tensor.ErrShape, func() {
		tensor.Grad([]*tensor.Tensor{y1}, []*tensor.Tensor{x}, tensor.GradOptions{RetainGraph: true})
	})
	s.Close()
	requireEmpty(t, d)
}

// Backward restricted to inputs accumulates into them only; a non-leaf input retains
// its gradient and the op that made it does not run.
func TestBackwardWithInputs(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	a := f32(s, d, []float32{1, 2}, 2).SetRequiresGrad(true)
	b := f32(s, d, []float32{3, 4}, 2).SetRequiresGrad(true)
	loss := a.Mul(b).Sum()
	loss.BackwardWith(tensor.BackwardOptions{Inputs: []*tensor.Tensor{a}})
	require.Equal(t, []float32{3, 4}, vals(a.Grad()))
	require.Nil(t, b.Grad())

	// As in PyTorch, the op that made a non-leaf input runs (and releases what it
	// saved) though its gradient goes nowhere: a retained graph can run again.
	h := a.Exp()
	h.Sum().BackwardWith(tensor.BackwardOptions{Inputs: []*tensor.Tensor{h}, RetainGraph: true})
	require.Equal(t, []float32{1, 1}, vals(h.Grad()))
	require.Equal(t, []float32{3, 4}, vals(a.Grad()), "a is not an input")
	h.Sum().BackwardWith(tensor.BackwardOptions{Inputs: []*tensor.Tensor{a}})
	require.InDeltaSlice(t, []float64{3 + math.E, 4 + math.Exp(2)}, vals64(a.Grad()), 1e-5)
	require.Equal(t, []float32{2, 2}, vals(h.Grad()), "h retains its gradient since the first backward, as RetainGrad does")
	err := tensor.Try(func() { h.Sum().BackwardWith(tensor.BackwardOptions{Inputs: []*tensor.Tensor{h}}) })
	require.ErrorIs(t, err, autograd.ErrBackwardTwice, "Exp ran in the last backward")
	requireOpError(t, "Backward", tensor.ErrGrad, func() {
		loss.BackwardWith(tensor.BackwardOptions{Inputs: []*tensor.Tensor{s.Ones(d, dtype.F32, 1)}})
	})
	s.Close()
	requireEmpty(t, d)
}
