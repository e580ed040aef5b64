package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/tensor"
)

// TestMultiStepsMatchSingleSteps: StepSGDMulti, StepAdamMulti and UnscaleMulti give
// every tensor the bits of its single-tensor step and bump the versions it does; bad
// lists are errors naming the op; nothing stays allocated.
func TestMultiStepsMatchSingleSteps(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(7)))
	sizes := []int{3, 0, 17, 1000}
	state := s.Generator().State()
	make4 := func() (ps [2][4][]*tensor.Tensor) { // two identical sets of p, g, m, v
		for set := range ps {
			s.Generator().Restore(state) // the same values in both sets
			for k := range ps[set] {
				for i, n := range sizes {
					dt := dtype.F32
					if i == 2 {
						dt = dtype.F64
					}
					ps[set][k] = append(ps[set][k], s.Rand(d, dt, n).Detach())
				}
			}
		}
		return ps
	}
	bits := func(ts []*tensor.Tensor) (out [][]byte) {
		for _, x := range ts {
			b := make([]byte, x.Bytes())
			x.CopyToHost(b)
			out = append(out, b)
		}
		return out
	}

	ps := make4()
	first := []bool{true, false, true, false}
	sgd := kernels.SGD{LR: 0.1, Momentum: 0.9, WeightDecay: 0.01}
	tensor.StepSGDMulti(sgd, ps[0][0], ps[0][1], ps[0][2], first)
	for i := range sizes {
		tensor.StepSGD(sgd, ps[1][0][i], ps[1][1][i], ps[1][2][i], first[i])
	}
	for k := range 3 {
		require.Equal(t, bits(ps[1][k]), bits(ps[0][k]), "SGD list %d", k)
	}
	require.Equal(t, uint64(1), ps[0][2][0].Version()-ps[0][3][0].Version(), "the buffer's version moved")

	ps = make4()
	steps := []int{1, 3, 2, 7}
	adam := kernels.Adam{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1}
	tensor.StepAdamMulti(adam, steps, ps[0][0], ps[0][1], ps[0][2], ps[0][3])
	for i := range sizes {
		tensor.StepAdam(adam, steps[i], ps[1][0][i], ps[1][1][i], ps[1][2][i], ps[1][3][i])
	}
	for k := range 4 {
		require.Equal(t, bits(ps[1][k]), bits(ps[0][k]), "Adam list %d", k)
	}

	ps = make4()
	found := [2]*tensor.Tensor{s.Zeros(d, dtype.F32), s.Zeros(d, dtype.F32)}
	tensor.UnscaleMulti(ps[0][1], 0.125, found[0])
	for _, g := range ps[1][1] {
		tensor.Unscale(g, 0.125, found[1])
	}
	require.Equal(t, bits(ps[1][1]), bits(ps[0][1]))
	require.Zero(t, found[0].Item())

	requireOpError(t, "StepAdamMulti", tensor.ErrShape, func() { tensor.StepAdamMulti(adam, steps[:2], ps[0][0], ps[0][1], ps[0][2], ps[0][3]) })
	requireOpError(t, "StepAdamMulti", tensor.ErrShape, func() {
		tensor.StepAdamMulti(adam, []int{1, 0, 1, 1}, ps[0][0], ps[0][1], ps[0][2], ps[0][3])
	})
	requireOpError(t, "StepSGDMulti", tensor.ErrShape, func() { tensor.StepSGDMulti(sgd, ps[0][0], ps[0][1], nil, first) })
	requireOpError(t, "StepSGDMulti", tensor.ErrDType, func() {
		tensor.StepSGDMulti(kernels.SGD{LR: 0.1}, ps[0][0][:1], []*tensor.Tensor{ps[0][1][2]}, nil, first[:1])
	})
	requireOpError(t, "UnscaleMulti", tensor.ErrDType, func() { tensor.UnscaleMulti(ps[0][1], 0.5, ps[0][1][0]) })
	s.Close()
	requireEmpty(t, d)
}
