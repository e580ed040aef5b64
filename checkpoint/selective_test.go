package checkpoint_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/checkpoint"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// geluStack runs each Linear of m followed by a GELU: GELU saves its input, the
// Linear's result, so a policy keeping the Linears' results leaves the recomputation
// only the GELUs to run.
func geluStack(m *nn.Sequential) checkpoint.Func {
	return func(in []*tensor.Tensor) []*tensor.Tensor {
		h := in[0]
		for _, l := range m.Children {
			h = l.Forward(h).Gelu()
		}
		return []*tensor.Tensor{h}
	}
}

// Selective checkpointing gives the gradients of a plain backward, keeps exactly the
// results the policy names after the forward, and releases them with the graph.
func TestSelectiveCheckpointKeepsWhatThePolicySays(t *testing.T) {
	const width, batch, depth = 16, 8, 3
	act := int64(width * batch * 4)
	for _, d := range tensortest.DataDevices(t) {
		t.Run(d.Name, func(t *testing.T) {
			m := linears(d.Device, depth, width, 1)
			run := func(c *checkpoint.Config) ([][]float32, []float32) {
				s := newScope(2)
				defer s.Close()
				x := input(s, d.Device, batch, width)
				start := tensortest.Requested(t, d.Device)
				var y *tensor.Tensor
				if c == nil {
					y = geluStack(m)([]*tensor.Tensor{x})[0]
				} else {
					y = c.CheckpointN(geluStack(m), x)[0]
					kept := int64(0)
					if c.Policy != nil {
						kept = depth * act
					}
					require.Equal(t, act+kept, tensortest.Requested(t, d.Device)-start, "after the forward: the result and the kept Linear results")
				}
				y.Sum().Backward()
				g := grads(m)
				xg := tensortest.Values(x.Grad())
				for _, p := range nn.Parameters(m) {
					p.ZeroGrad(true)
				}
				return g, xg
			}
			plainG, plainX := run(nil)
			for _, c := range []*checkpoint.Config{{}, {Policy: checkpoint.SaveOps(tensor.OpLinear)}} {
				g, xg := run(c)
				require.Equal(t, plainG, g)
				require.Equal(t, plainX, xg)
			}
			require.Equal(t, nn.ParameterBytes(m), tensortest.Requested(t, d.Device), "the kept results went with the graph")
			m.Release()
			tensortest.RequireEmpty(t, d.Device)
		})
	}
}

// The recomputation does not run the ops whose results were kept: with the weight
// changed in place after the forward (which checkpointing does not track), the ReLU
// that follows the Linear sees the forward's result, not a recomputed one.
func TestSelectiveCheckpointDoesNotRecomputeKeptOps(t *testing.T) {
	d := tensortest.CPU(t)
	ps := tensor.NewScope()
	w := ps.Keep(tensortest.F32(ps, d, []float32{1, 0}, 1, 2)).AsParameter()
	ps.Close()
	fn := func(in []*tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{tensor.Linear(in[0], w, nil).Relu()}
	}
	grad := func(c checkpoint.Config) []float32 {
		s := tensor.NewScope()
		defer s.Close()
		w.CopyFrom(tensortest.F32(s, d, []float32{1, 0}, 1, 2))
		x := tensortest.F32(s, d, []float32{1, -1}, 1, 2).SetRequiresGrad(true)
		y := c.CheckpointN(fn, x)[0] // x·wᵀ = 1: the ReLU passes it
		w.CopyFrom(tensortest.F32(s, d, []float32{-1, 0}, 1, 2))
		y.Sum().Backward()
		w.ZeroGrad(true)
		return tensortest.Values(x.Grad())
	}
	require.Equal(t, []float32{0, 0}, grad(checkpoint.Config{}), "recomputed: x·w'ᵀ = −1, the ReLU blocks")
	require.Equal(t, []float32{-1, 0}, grad(checkpoint.Config{Policy: checkpoint.SaveOps(tensor.OpLinear)}),
		"kept: the forward's 1 passes, times the weight the recomputed Linear saved")
	w.Release()
	tensortest.RequireEmpty(t, d)
}

// The policy is asked only of the ops whose results can be reused (LayerNorm, which
// saves statistics it computes, is always recomputed), and a policy keeping all of
// them gives the plain gradients.
func TestSelectiveCheckpointAsksOnlyReusableOps(t *testing.T) {
	d := tensortest.CPU(t)
	m := linears(d, 2, 8, 3)
	asked := map[string]int{}
	all := func(op string, _ []*tensor.Tensor) checkpoint.Decision {
		asked[op]++
		return checkpoint.Save
	}
	fn := func(in []*tensor.Tensor) []*tensor.Tensor {
		h := tensor.LayerNorm(m.Children[0].Forward(in[0]), nil, nil, 1e-5)
		return []*tensor.Tensor{m.Children[1].Forward(h).Tanh()}
	}
	run := func(c *checkpoint.Config) [][]float32 {
		s := newScope(1)
		defer s.Close()
		x := input(s, d, 4, 8)
		apply(c, fn, x).Sum().Backward()
		g := grads(m)
		for _, p := range nn.Parameters(m) {
			p.ZeroGrad(true)
		}
		return g
	}
	require.Equal(t, run(nil), run(&checkpoint.Config{Policy: all}))
	require.Equal(t, map[string]int{tensor.OpLinear: 2, tensor.OpTanh: 1}, asked, "asked in the forward only, never of LayerNorm")
	m.Release()
	tensortest.RequireEmpty(t, d)
}

// A recomputation that runs another op where the forward kept a result, or finds a
// kept result changed in place, fails the backward.
func TestSelectiveCheckpointMismatches(t *testing.T) {
	d := tensortest.CPU(t)
	c := checkpoint.Config{Policy: checkpoint.SaveOps(tensor.OpExp, tensor.OpTanh)}
	runs := 0
	branchy := func(in []*tensor.Tensor) []*tensor.Tensor {
		runs++
		if runs == 1 {
			return []*tensor.Tensor{in[0].Exp().Sigmoid()}
		}
		return []*tensor.Tensor{in[0].Tanh().Sigmoid()}
	}
	s := tensor.NewScope()
	x := s.Ones(d, dtype.F32, 3).SetRequiresGrad(true)
	err := tensor.Try(func() { c.CheckpointN(branchy, x)[0].Sum().Backward() })
	require.ErrorIs(t, err, checkpoint.ErrNondeterministic)
	require.ErrorContains(t, err, "Tanh, where the forward ran Exp")

	changed := func(in []*tensor.Tensor) []*tensor.Tensor {
		h := in[0].Exp()
		h.Detach().Scale(1)
		return []*tensor.Tensor{h.Sigmoid()}
	}
	err = tensor.Try(func() { c.CheckpointN(changed, x)[0].Sum().Backward() })
	require.ErrorContains(t, err, "modified in place")
	s.Close()
	tensortest.RequireEmpty(t, d)
}

// At full size on the meta device: after the forward a selective checkpoint holds the
// kept Linear results and nothing else of the function; after the backward, the
// parameters and their gradients.
func TestSelectiveCheckpointMemoryAtFullSize(t *testing.T) {
	const width, batch, depth = 4096, 2048, 4
	act := int64(width * batch * 4)
	d := tensortest.Meta(t)
	m := linears(d, depth, width, 1)
	s := tensor.NewScope()
	x := s.Zeros(d, dtype.F32, batch, width).SetRequiresGrad(true)
	c := checkpoint.Config{Policy: checkpoint.SaveOps(tensor.OpLinear)}
	y := c.CheckpointN(geluStack(m), x)[0]
	loss := y.Sum()
	params := nn.ParameterBytes(m)
	require.Equal(t, params+act+depth*act+act+4, tensortest.Requested(t, d), "parameters, x, the kept results, y and the loss")
	loss.Backward()
	require.Equal(t, 2*params+act+act+4+act, tensortest.Requested(t, d), "and the gradients, x's among them")
	s.Close()
	require.Equal(t, 2*params, tensortest.Requested(t, d))
	m.Release()
	tensortest.RequireEmpty(t, d)
}

// A copy to another device in the function (To of a strided tensor, which needs a
// kernel on its own device) is no op the policy or the recomputation numbers: the
// kept results stay matched with their ops. (The forward counted it and the
// recomputation did not, so the second MatMul was handed the first one's result, and
// the LayerNorm after it, which is always recomputed, saved the wrong input: wrong
// gradients, silently.)
func TestSelectiveCheckpointAcrossDevices(t *testing.T) {
	host, dev := tensortest.CPU(t), tensortest.Sim(t, 64<<20, true)
	ps := tensor.NewScope()
	w := ps.Keep(tensortest.F32(ps, dev, []float32{1, 2, -1, 0.5, 0, 1, -2, 1, 0.25}, 3, 3)).AsParameter()
	g := ps.Keep(tensortest.F32(ps, dev, []float32{1, 3, -2}, 3)).AsParameter()
	ps.Close()
	fn := func(in []*tensor.Tensor) []*tensor.Tensor {
		a := in[0].T().To(dev).MatMul(w)
		return []*tensor.Tensor{tensor.LayerNorm(a.MatMul(w), g, nil, 1e-5)}
	}
	run := func(c *checkpoint.Config) ([]float32, []float32) {
		s := tensor.NewScope()
		defer s.Close()
		x := tensortest.F32(s, host, []float32{0.5, -1, 0.25, 2, 1, -0.5, 0, 1.5, -1}, 3, 3).SetRequiresGrad(true)
		apply(c, fn, x).Sum().Backward()
		wg, xg := tensortest.Values(w.Grad()), tensortest.Values(x.Grad())
		w.ZeroGrad(true)
		g.ZeroGrad(true)
		return wg, xg
	}
	wantW, wantX := run(nil)
	gotW, gotX := run(&checkpoint.Config{Policy: checkpoint.SaveOps(tensor.OpMatMul)})
	require.Equal(t, wantW, gotW)
	require.Equal(t, wantX, gotX)
	w.Release()
	g.Release()
	tensortest.RequireEmpty(t, dev)
	tensortest.RequireEmpty(t, host)
}

// An op with an explicit result type narrower than its input (SumAs(F16) of F32 casts
// the input first, inside the op) is one op for the policy and the recomputation
// alike. (The forward numbered the cast before the op, the recomputation after it, so
// the kept Sum was asked for by the cast: the backward failed.)
func TestSelectiveCheckpointOfATypedOp(t *testing.T) {
	d := tensortest.CPU(t)
	fn := func(in []*tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{in[0].SumAs(dtype.F16, 1).Tanh()}
	}
	grad := func(c *checkpoint.Config) []float32 {
		s := newScope(1)
		defer s.Close()
		x := input(s, d, 4, 8)
		apply(c, fn, x).Cast(dtype.F32).Sum().Backward()
		return tensortest.Values(x.Grad())
	}
	require.Equal(t, grad(nil), grad(&checkpoint.Config{Policy: checkpoint.SaveOps(tensor.OpSum)}))
	tensortest.RequireEmpty(t, d)
}

// A selectively checkpointed function is backpropagated once, as in PyTorch: the first
// backward's recomputation takes the kept results (they are freed as their ops use
// them, not held to the end), and a second backward through the retained graph fails
// with PyTorch's "Trying to backward an extra time" instead of running on. Without a
// policy the function is recomputed for every backward.
func TestSelectiveCheckpointBackwardOnce(t *testing.T) {
	const width, batch, depth = 16, 8, 3
	act := int64(width * batch * 4)
	d := tensortest.CPU(t)
	m := linears(d, depth, width, 1)
	for _, c := range []checkpoint.Config{{Policy: checkpoint.SaveOps(tensor.OpLinear)}, {}} {
		s := newScope(2)
		x := input(s, d, batch, width)
		y := c.CheckpointN(geluStack(m), x)[0]
		loss := y.Sum()
		loss.BackwardWith(tensor.BackwardOptions{RetainGraph: true})
		first := grads(m)
		for _, p := range nn.Parameters(m) {
			p.ZeroGrad(true)
		}
		x.ZeroGrad(true)
		// Held: the parameters, x, the result, the loss and the kept input of the
		// checkpoint; no kept Linear result any more.
		tensortest.RequireLive(t, d, "after the first backward", append(tensortest.Sizes(nn.Parameters(m)...), act, act, 4)...)
		err := tensor.Try(func() { loss.Backward() })
		if c.Policy != nil {
			require.ErrorIs(t, err, checkpoint.ErrExtraBackward)
			require.ErrorContains(t, err, "trying to backward an extra time. You are only allowed to backward once "+
				"on any region computed under selective activation checkpoint (op 0, Linear, whose kept result an earlier backward used)")
		} else {
			require.NoError(t, err)
			require.Equal(t, first, grads(m), "recomputed again, the same gradients")
		}
		s.Close()
		for _, p := range nn.Parameters(m) {
			p.ZeroGrad(true)
		}
	}
	m.Release()
	tensortest.RequireEmpty(t, d)
}
