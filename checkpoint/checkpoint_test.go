package checkpoint_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/checkpoint"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// counted wraps layers in a Func that counts its runs.
func counted(calls *int, layers ...checkpoint.Layer) checkpoint.Func {
	return func(in []*tensor.Tensor) []*tensor.Tensor {
		*calls++
		h := in[0]
		for _, l := range layers {
			h = tensor.Layer(h, l.Forward)
		}
		return []*tensor.Tensor{h}
	}
}

// TestRetainGraph: with RetainGraph each backward recomputes once, the recomputed
// tensors are gone after each (only what the plain graph retains stays), and the
// second backward accumulates the same gradients again.
func TestRetainGraph(t *testing.T) {
	const width, batch = 16, 8
	act := int64(width * batch * 4)
	for _, d := range tensortest.DataDevices(t) {
		m := linears(d.Device, 3, width, 1)
		s := newScope(2)
		x := input(s, d.Device, batch, width)
		start := tensortest.Requested(t, d.Device)
		calls := 0
		y := checkpoint.CheckpointN(counted(&calls, layersOf(m)...), x)[0]
		require.Equal(t, 1, calls)
		require.Equal(t, act, tensortest.Requested(t, d.Device)-start, "%s: after the forward, the output only", d.Name)
		loss := y.Sum()

		loss.BackwardWith(tensor.BackwardOptions{RetainGraph: true})
		require.Equal(t, 2, calls, "%s: one recompute", d.Name)
		first := grads(m)
		gradBytes := nn.GradBytes(m)
		require.Equal(t, act+4+gradBytes+act, tensortest.Requested(t, d.Device)-start,
			"%s: y, the loss, the gradients and the input's: no recomputed tensor outlives the backward", d.Name)

		loss.BackwardWith(tensor.BackwardOptions{RetainGraph: true})
		require.Equal(t, 3, calls, "%s: the second backward recomputes again", d.Name)
		second := grads(m)
		for i := range first {
			for j := range first[i] {
				require.Equal(t, 2*first[i][j], second[i][j], "%s: gradient %d[%d] accumulated twice", d.Name, i, j)
			}
		}
		require.Equal(t, act+4+gradBytes+act, tensortest.Requested(t, d.Device)-start)

		s.Close()
		require.Equal(t, 2*nn.ParameterBytes(m), tensortest.Requested(t, d.Device), "%s: the retained graph went with the scope", d.Name)
		m.Release()
		tensortest.RequireEmpty(t, d.Device)
	}
}

// TestRegeneratedForNodesNotRun: with a retained graph, a backward from one of two
// results leaves the tensors regenerated for the other result's nodes with their
// holders (one activation here), until a recompute replaces them or the graph goes.
func TestRegeneratedForNodesNotRun(t *testing.T) {
	const width, batch = 8, 4
	act := int64(width * batch * 4)
	dev := tensortest.CPU(t)
	m := linears(dev, 3, width, 1)
	l := layersOf(m)
	s := newScope(2)
	x := input(s, dev, batch, width)
	calls := 0
	out := checkpoint.CheckpointN(func(in []*tensor.Tensor) []*tensor.Tensor {
		calls++
		h := tensor.Layer(in[0], l[0].Forward)
		return []*tensor.Tensor{tensor.Layer(h, l[1].Forward), tensor.Layer(h, l[2].Forward)}
	}, x)
	la, lb := out[0].Sum(), out[1].Sum()
	start := tensortest.Requested(t, dev)

	la.BackwardWith(tensor.BackwardOptions{RetainGraph: true})
	assert.Equal(t, 2, calls)
	assert.Equal(t, nn.ParameterBytes(m)-nn.ParameterBytes(m.Children[2]), nn.GradBytes(m), "the third layer got no gradient")
	assert.Equal(t, nn.GradBytes(m)+act+act, tensortest.Requested(t, dev)-start,
		"the gradients, the input's, and the hidden activation regenerated for the third layer")

	lb.BackwardWith(tensor.BackwardOptions{RetainGraph: true})
	assert.Equal(t, 3, calls, "the third layer used what was left; the first layer's node needed a recompute")
	assert.Equal(t, nn.ParameterBytes(m)+act+act, tensortest.Requested(t, dev)-start,
		"the gradients, the input's, and the hidden activation regenerated for the second layer")
	finish(t, dev, s, m)
}

// TestRecomputeAfterAResultWasReleased: a result released before the backward frees
// its nodes and so their holders; the recompute the other result's backward runs
// regenerates their tensors too (it runs the function in order) and drops them at once,
// so the backward leaves only the gradients.
func TestRecomputeAfterAResultWasReleased(t *testing.T) {
	const width, batch = 8, 4
	dev := tensortest.CPU(t)
	m := linears(dev, 2, width, 1)
	l := layersOf(m)
	s := newScope(2)
	x := input(s, dev, batch, width)
	calls := 0
	out := checkpoint.CheckpointN(func(in []*tensor.Tensor) []*tensor.Tensor {
		calls++
		return []*tensor.Tensor{tensor.Layer(in[0], l[0].Forward), tensor.Layer(in[0], l[1].Forward)}
	}, x)
	out[0].Release()
	loss := out[1].Sum()
	start := tensortest.Requested(t, dev)

	loss.Backward()
	assert.Equal(t, 2, calls)
	assert.Equal(t, nn.ParameterBytes(m.Children[1]), nn.GradBytes(m), "only the second layer got gradients")
	assert.Equal(t, nn.GradBytes(m)+x.Bytes(), tensortest.Requested(t, dev)-start,
		"the gradients and the input's: nothing regenerated stays")

	// The same gradients as without checkpointing.
	want := grads(m.Children[1])
	wantX := tensor.ToSlice[float32](x.Grad())
	m.Children[1].(*nn.Linear).Weight.ZeroGrad(true)
	m.Children[1].(*nn.Linear).Bias.ZeroGrad(true)
	x.ZeroGrad(true)
	tensor.Layer(x, l[1].Forward).Sum().Backward()
	assert.Equal(t, want, grads(m.Children[1]))
	assert.Equal(t, wantX, tensor.ToSlice[float32](x.Grad()))
	finish(t, dev, s, m)
}

// TestEarlyStop: the recompute stops once the last saved tensor is regenerated, so
// ops after it (here a MulScalar, which saves nothing) do not run again; NoEarlyStop
// runs the whole function.
func TestEarlyStop(t *testing.T) {
	for _, c := range []struct {
		cfg  checkpoint.Config
		want int
	}{{checkpoint.Config{}, 1}, {checkpoint.Config{NoEarlyStop: true}, 2}} {
		dev := tensortest.CPU(t)
		m := linears(dev, 2, 8, 1)
		s := newScope(2)
		x := input(s, dev, 4, 8)
		tailRuns := 0
		fn := func(in []*tensor.Tensor) []*tensor.Tensor {
			h := m.Forward(in[0])
			tailRuns++
			return []*tensor.Tensor{h.MulScalar(3)}
		}
		c.cfg.CheckpointN(fn, x)[0].Sum().Backward()
		assert.Equal(t, c.want, tailRuns, "%+v", c.cfg)
		finish(t, dev, s, m)
	}
}

// flaky returns a Func that runs first on its first call and then on later calls.
func flaky(first, then func(x *tensor.Tensor) *tensor.Tensor) checkpoint.Func {
	calls := 0
	return func(in []*tensor.Tensor) []*tensor.Tensor {
		calls++
		if calls == 1 {
			return []*tensor.Tensor{first(in[0])}
		}
		return []*tensor.Tensor{then(in[0])}
	}
}

// TestDeterminismCheck: a recompute that saves tensors of other shapes, fewer, or more
// than the forward fails the backward with PyTorch's messages; nothing of it stays.
func TestDeterminismCheck(t *testing.T) {
	dev := tensortest.CPU(t)
	m := linears(dev, 1, 8, 1)
	defer m.Release()
	w := m.Children[0].(*nn.Linear).Weight
	mm := func(x *tensor.Tensor) *tensor.Tensor { return x.MatMul(w) }
	twice := func(x *tensor.Tensor) *tensor.Tensor { return x.MatMul(w).MatMul(w) }
	cases := []struct {
		name string
		cfg  checkpoint.Config
		fn   checkpoint.Func
		want []string // in the error; none: the backward succeeds
	}{
		{"shape", checkpoint.Config{}, flaky(mm, func(x *tensor.Tensor) *tensor.Tensor { return x.Slice(0, 0, 2).MatMul(w) }),
			[]string{"recomputed values for the following tensors have different metadata than during the forward pass",
				"tensor at position 0:\nsaved metadata: {shape: [4 8], dtype: float32, device: cpu}\nrecomputed metadata: {shape: [2 8], dtype: float32, device: cpu}"}},
		{"dtype", checkpoint.Config{}, flaky(mm, func(x *tensor.Tensor) *tensor.Tensor { return x.Cast(dtype.BF16).MatMul(w) }),
			[]string{"tensor at position 0:\nsaved metadata: {shape: [4 8], dtype: float32, device: cpu}\nrecomputed metadata: {shape: [4 8], dtype: bfloat16, device: cpu}"}},
		{"fewer", checkpoint.Config{}, flaky(twice, mm),
			[]string{"a different number of tensors was saved during the original forward and recomputation",
				"Number of tensors saved during forward: 4\nNumber of tensors saved during recomputation: 2"}},
		{"more", checkpoint.Config{NoEarlyStop: true}, flaky(mm, twice),
			[]string{"trying to save more tensors during recomputation than during the original forward pass (2)"}},
		{"more, unchecked", checkpoint.Config{NoEarlyStop: true, SkipDeterminismCheck: true}, flaky(mm, twice), nil},
		{"more, early stop", checkpoint.Config{}, flaky(mm, twice), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newScope(2)
			x := input(s, dev, 4, 8)
			y := c.cfg.CheckpointN(c.fn, x)[0]
			err := tensor.Try(func() { y.Sum().Backward() })
			if c.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, checkpoint.ErrNondeterministic)
				for _, w := range c.want {
					assert.Contains(t, err.Error(), w)
				}
			}
			s.Close()
			for _, p := range nn.Parameters(m) {
				p.ZeroGrad(true)
			}
			require.Equal(t, nn.ParameterBytes(m), tensortest.Requested(t, dev), "nothing of the failed step stays")
		})
	}
}

// TestNoGrad: in a scope that records nothing the function just runs once, and only
// its result is held.
func TestNoGrad(t *testing.T) {
	dev := tensortest.Meta(t)
	m := linears(dev, 4, 64, 1)
	s := tensor.NewScope(tensor.NoGrad(), tensor.WithGenerator(tensor.NewGenerator(1)))
	x := s.Randn(dev, dtype.F32, 32, 64)
	start := tensortest.Requested(t, dev)
	calls := 0
	y := checkpoint.CheckpointN(counted(&calls, layersOf(m)...), x)[0]
	assert.Equal(t, 1, calls)
	assert.False(t, y.RequiresGrad())
	assert.Equal(t, y.Bytes(), tensortest.Requested(t, dev)-start)
	assert.Same(t, s, y.Scope())
	finish(t, dev, s, m)
}

// TestNested: a checkpoint inside a checkpoint. After the forward only the outer
// input and the output are held; the backward recomputes the outer function once
// (which runs the inner call again) and the inner one once, with the plain run's
// gradients, bit for bit.
func TestNested(t *testing.T) {
	const width, batch = 16, 8
	act := int64(width * batch * 4)
	for _, d := range tensortest.DataDevices(t) {
		run := func(nested bool) ([][]float32, int, int, int64) {
			m := linears(d.Device, 4, width, 7)
			defer m.Release()
			l := layersOf(m)
			s := newScope(8)
			defer s.Close()
			x := input(s, d.Device, batch, width)
			start := tensortest.Requested(t, d.Device)
			var outer, inner int
			var y *tensor.Tensor
			if nested {
				innerFn := counted(&inner, l[1], l[2])
				y = checkpoint.CheckpointN(func(in []*tensor.Tensor) []*tensor.Tensor {
					outer++
					h := tensor.Layer(in[0], l[0].Forward)
					h = checkpoint.CheckpointN(innerFn, h)[0]
					return []*tensor.Tensor{tensor.Layer(h, l[3].Forward)}
				}, x)[0]
			} else {
				y = m.Forward(x)
			}
			kept := tensortest.Requested(t, d.Device) - start
			y.Sum().Backward()
			return grads(m), outer, inner, kept
		}
		want, _, _, plainKept := run(false)
		got, outer, inner, kept := run(true)
		require.Equal(t, want, got, d.Name)
		assert.Equal(t, 4*act, plainKept)
		assert.Equal(t, act, kept, "%s: the output only", d.Name)
		assert.Equal(t, 2, outer, "%s: forward and one recompute", d.Name)
		assert.Equal(t, 3, inner, "%s: forward, inside the outer recompute, its own recompute", d.Name)
		tensortest.RequireEmpty(t, d.Device)
	}
}

// keepHooks are saved hooks that keep each value as is and count the calls.
type keepHooks struct{ packs, unpacks int }

func (h *keepHooks) Pack(v autograd.Value) (autograd.Value, error) {
	h.packs++
	return v, nil
}

func (h *keepHooks) Unpack(p autograd.Value) (autograd.Value, error) {
	h.unpacks++
	s := tensor.NewScope()
	defer s.Close()
	return s.Keep(s.Bind(p.(*tensor.Tensor))), nil
}

// TestInputsThroughOuterHooks: under saved-tensor hooks of the calling scope the
// checkpoint keeps its inputs through them (as an op saving them would), and gets
// them back through them for the recompute.
func TestInputsThroughOuterHooks(t *testing.T) {
	dev := tensortest.CPU(t)
	m := linears(dev, 2, 8, 1)
	h := &keepHooks{}
	s := tensor.NewScope(tensor.WithSavedHooks(h), tensor.WithGenerator(tensor.NewGenerator(1)))
	x := input(s, dev, 4, 8)
	checkpoint.CheckpointN(counted(new(int), layersOf(m)...), x)[0].Sum().Backward()
	assert.Equal(t, 1, h.packs, "the input")
	assert.Equal(t, 1, h.unpacks, "for the recompute")
	finish(t, dev, s, m)
}

// TestInputModifiedInPlace: an input written in place after the forward would make
// the recompute see other values: the backward fails naming it.
func TestInputModifiedInPlace(t *testing.T) {
	dev := tensortest.CPU(t)
	m := linears(dev, 2, 8, 1)
	s := newScope(1)
	x := s.Randn(dev, dtype.F32, 4, 8)
	y := checkpoint.CheckpointN(counted(new(int), layersOf(m)...), x)[0]
	x.Fill(0)
	err := tensor.Try(func() { y.Sum().Backward() })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "checkpoint: input 0 {shape: [4 8], dtype: float32, device: cpu} was modified in place since the forward (version 0, now 1)")
	finish(t, dev, s, m)
}

// TestReleaseWithoutBackward: the inputs a checkpoint keeps go with its graph, with or
// without a backward.
func TestReleaseWithoutBackward(t *testing.T) {
	dev := tensortest.Meta(t)
	m := linears(dev, 3, 64, 1)
	s := newScope(1)
	x := input(s, dev, 32, 64)
	start := tensortest.Requested(t, dev)
	h := x.MulScalar(2) // an intermediate the checkpoint keeps as its input
	y := checkpoint.CheckpointN(counted(new(int), layersOf(m)...), h)[0]
	h.Release()
	assert.Equal(t, 2*x.Bytes(), tensortest.Requested(t, dev)-start, "the kept input and the output")
	y.Release()
	assert.Equal(t, start, tensortest.Requested(t, dev), "the graph is freed: the input goes with it")
	finish(t, dev, s, m)
}

// TestOutputs: several inputs and results, results that are inputs, and results
// belonging to the innermost input scope.
func TestOutputs(t *testing.T) {
	dev := tensortest.CPU(t)
	s := newScope(1)
	inner := s.Child()
	a := input(s, dev, 2, 3)
	b := inner.Bind(input(s, dev, 2, 3))
	out := checkpoint.CheckpointN(func(in []*tensor.Tensor) []*tensor.Tensor {
		p := in[0].Mul(in[1])
		return []*tensor.Tensor{p, in[0], p}
	}, a, b)
	require.Len(t, out, 3)
	for _, o := range out {
		assert.Same(t, inner, o.Scope())
	}
	out[0].Add(out[1]).Sum().Backward()
	want := tensor.ToSlice[float32](b)
	for i := range want {
		want[i]++
	}
	assert.Equal(t, want, tensor.ToSlice[float32](a.Grad()), "d(a·b + a)/da = b + 1")
	assert.Equal(t, tensor.ToSlice[float32](a), tensor.ToSlice[float32](b.Grad()))
	s.Close()
	tensortest.RequireEmpty(t, dev)
}

// TestMisuse: errors at the call are *tensor.Errors naming checkpoint.Checkpoint.
func TestMisuse(t *testing.T) {
	dev := tensortest.CPU(t)
	m := linears(dev, 1, 4, 1)
	defer m.Release()
	w := m.Children[0].(*nn.Linear).Weight
	s := newScope(1)
	defer s.Close()
	other := newScope(1)
	defer other.Close()
	x := input(s, dev, 2, 4)
	unrelated := input(other, dev, 2, 4)
	id := func(in []*tensor.Tensor) []*tensor.Tensor { return in }
	cases := []struct {
		name  string
		cause error
		call  func()
	}{
		{"no scope", tensor.ErrScope, func() { checkpoint.CheckpointN(id, w) }},
		{"unrelated scopes", tensor.ErrScope, func() { checkpoint.CheckpointN(id, x, unrelated) }},
		{"nil input", tensor.ErrShape, func() { checkpoint.CheckpointN(id, x, nil) }},
		{"result not from the function", tensor.ErrScope, func() {
			checkpoint.CheckpointN(func([]*tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{w} }, x)
		}},
		{"nil result", tensor.ErrShape, func() {
			checkpoint.CheckpointN(func([]*tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{nil} }, x)
		}},
	}
	before := tensortest.Requested(t, dev)
	for _, c := range cases {
		err := tensor.Try(c.call)
		require.ErrorIs(t, err, c.cause, c.name)
		var te *tensor.Error
		require.ErrorAs(t, err, &te)
		assert.Equal(t, "checkpoint.Checkpoint", te.Op, c.name)
		assert.Equal(t, before, tensortest.Requested(t, dev), "%s: a refused call keeps nothing", c.name)
	}
}

// TestFunctionPanics: a function failing during the recompute (before it saved
// everything: a failure after that is never reached) fails the backward and leaves
// nothing behind.
func TestFunctionPanics(t *testing.T) {
	dev := tensortest.CPU(t)
	m := linears(dev, 2, 8, 1)
	s := newScope(1)
	x := input(s, dev, 4, 8)
	fn := flaky(m.Forward, func(x *tensor.Tensor) *tensor.Tensor { return m.Forward(x.Reshape(3, 5)) })
	y := checkpoint.CheckpointN(fn, x)[0]
	err := tensor.Try(func() { y.Sum().Backward() })
	require.ErrorIs(t, err, tensor.ErrShape)
	s.Close()
	for _, p := range nn.Parameters(m) {
		p.ZeroGrad(true)
	}
	assert.Equal(t, nn.ParameterBytes(m), tensortest.Requested(t, dev))
	m.Release()
	tensortest.RequireEmpty(t, dev)
}

// bf16Linear is a toy autocast policy: Linear computes in bfloat16.
type bf16Linear struct{}

func (bf16Linear) Inputs(_ *tensor.Scope, op string, in []*tensor.Tensor, cast func(*tensor.Tensor, dtype.DType) *tensor.Tensor) []*tensor.Tensor {
	if op != tensor.OpLinear {
		return in
	}
	for i, t := range in {
		if t.DType() == dtype.F32 {
			in[i] = cast(t, dtype.BF16)
		}
	}
	return in
}

// TestAutocast: the recompute runs under the forward's autocast policy (else it would
// save F32 where the forward saved BF16 and the determinism check would fail), so the
// gradients equal those of the plain autocast run.
func TestAutocast(t *testing.T) {
	for _, d := range tensortest.DataDevices(t) {
		run := func(k int) [][]float32 {
			m := linears(d.Device, 4, 16, 3)
			defer m.Release()
			s := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(4)), tensor.WithAutocast(bf16Linear{}))
			defer s.Close()
			x := input(s, d.Device, 8, 16)
			y := forward(m, checkpoint.Config{}, k, x)
			require.Equal(t, dtype.BF16, y.DType())
			y.Cast(dtype.F32).Sum().Backward()
			return grads(m)
		}
		want := run(0)
		require.Equal(t, want, run(2), d.Name)
		require.Equal(t, want, run(4), d.Name)
		tensortest.RequireEmpty(t, d.Device)
	}
}

// TestGoroutines: two goroutines train their own checkpointed models at once (run
// with -race).
func TestGoroutines(t *testing.T) {
	var wg sync.WaitGroup
	devs := []device.Device{tensortest.CPU(t), tensortest.CPU(t)}
	errs := make([]error, len(devs))
	for i, dev := range devs {
		wg.Go(func() {
			errs[i] = tensor.Try(func() {
				m := linears(dev, 6, 16, uint64(i))
				defer m.Release()
				for range 3 {
					s := newScope(uint64(i))
					checkpoint.Sequential(layersOf(m), 3, input(s, dev, 8, 16)).Sum().Backward()
					s.Close()
				}
				if got := tensortest.Requested(t, dev); got != 2*nn.ParameterBytes(m) {
					panic(&tensor.Error{Op: "test", Msg: fmt.Sprintf("goroutine %d: %d bytes live", i, got)})
				}
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "goroutine %d", i)
		tensortest.RequireEmpty(t, devs[i])
	}
}
