package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

// BCELoss of σ(z) and BCEWithLogitsLoss of z agree, and a logistic regression trained
// with the logits form separates two clusters; each step's scope releases everything
// but the parameters and their gradients.
func TestBCELosses(t *testing.T) {
	d := newCPU(t)
	lin := nn.NewLinear(nn.Init{Device: d, Gen: tensor.NewGenerator(3)}, 2, 1, true)
	opt, err := optim.NewSGD(nn.Parameters(lin), optim.SGDConfig{LR: 0.5})
	require.NoError(t, err)
	data := tensor.NewScope()
	x := f32(data, d, []float32{1, 2, 2, 1, 1.5, 1.5, -1, -2, -2, -1, -1.5, -1.5}, 6, 2)
	y := f32(data, d, []float32{1, 1, 1, 0, 0, 0}, 6, 1)
	var first, last float64
	for step := range 30 {
		s := data.Child()
		z := lin.Forward(s.Bind(x))
		loss := nn.BCEWithLogitsLoss{}.Loss(z, s.Bind(y))
		plain := nn.BCELoss{}.Loss(z.Detach().Sigmoid(), s.Bind(y))
		require.InDelta(t, loss.Item(), plain.Item(), 1e-5, "step %d", step)
		if step == 0 {
			first = loss.Item()
		}
		last = loss.Item()
		opt.ZeroGrad(true)
		loss.Backward()
		opt.Step()
		s.Close()
		requireLive(t, d, "after a step", cat(paramSizes(lin), paramSizes(lin), []int64{x.Bytes(), y.Bytes()})...)
	}
	require.Less(t, last, first/4, "the loss goes down")
	pos := f32(data, d, []float32{2}, 1)
	weighted := nn.BCEWithLogitsLoss{PosWeight: pos, Reduction: tensor.ReduceSum}.
		Loss(f32(data, d, []float32{0, 0}, 2), f32(data, d, []float32{1, 0}, 2))
	require.InDelta(t, 3*0.6931471805599453, weighted.Item(), 1e-6, "2·ln 2 for the positive, ln 2 for the negative")
	require.Equal(t, dtype.F32, weighted.DType())
	data.Close()
	lin.Release()
	requireEmpty(t, d)
}
