package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/checkpoint"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

func TestLinearInitIsPyTorchsUniform(t *testing.T) {
	d := newCPU(t)
	l := nn.NewLinear(nn.Init{Device: d, Gen: tensor.NewGenerator(1)}, 100, 50, true)
	require.Equal(t, []int{50, 100}, l.Weight.Shape())
	require.Equal(t, []int{50}, l.Bias.Shape())
	requireLive(t, d, "after NewLinear (its init temporaries are gone)", 50*100*4, 50*4)

	bound := 1 / math.Sqrt(100)
	w := vals(l.Weight)
	var sum, sq float64
	for _, v := range w {
		require.True(t, float64(v) >= -bound && float64(v) < bound, "weight %v outside ±%v", v, bound)
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	mean, variance := sum/float64(len(w)), sq/float64(len(w))
	assert.InDelta(t, 0, mean, 0.004, "mean of U(±b)")
	assert.InDelta(t, bound*bound/3, variance, 0.1*bound*bound/3, "variance of U(±b) is b²/3")
	for _, v := range vals(l.Bias) {
		require.True(t, float64(v) >= -bound && float64(v) < bound, "bias %v outside ±%v", v, bound)
	}
	require.True(t, l.Weight.RequiresGrad() && l.Weight.IsLeaf() && l.Weight.Scope() == nil, "a parameter is a leaf owned by its module")

	l.Release()
	l.Release()
	requireEmpty(t, d)
}

func TestLinearInitIsSeeded(t *testing.T) {
	d := newCPU(t)
	a := nn.NewLinear(nn.Init{Device: d, Gen: tensor.NewGenerator(7)}, 4, 3, true)
	b := nn.NewLinear(nn.Init{Device: d, Gen: tensor.NewGenerator(7)}, 4, 3, true)
	c := nn.NewLinear(nn.Init{Device: d, Gen: tensor.NewGenerator(8)}, 4, 3, true)
	assert.Equal(t, vals(a.Weight), vals(b.Weight))
	assert.Equal(t, vals(a.Bias), vals(b.Bias))
	assert.NotEqual(t, vals(a.Weight), vals(c.Weight))
	assert.NotEqual(t, vals(a.Weight)[:3], vals(a.Bias), "the bias is drawn after the weight")
	for _, m := range []nn.Module{a, b, c} {
		m.Release()
	}
	requireEmpty(t, d)
}

func TestLinearForwardAndNames(t *testing.T) {
	d := newCPU(t)
	l := nn.NewLinear(nn.Init{Device: d, Gen: tensor.NewGenerator(3)}, 3, 2, true)
	s := tensor.NewScope()
	x := f32(s, d, []float32{1, 2, 3, -1, 0, 0.5}, 2, 3)
	y := l.Forward(x)
	require.Same(t, s, y.Scope(), "the result belongs to the input's scope")
	w, b := vals(l.Weight), vals(l.Bias)
	xs := vals(x)
	got := vals(y)
	for i := range 2 {
		for o := range 2 {
			want := float64(b[o])
			for k := range 3 {
				want += float64(xs[i*3+k]) * float64(w[o*3+k])
			}
			assert.InDelta(t, want, got[i*2+o], 1e-6)
		}
	}
	s.Close()

	var names []string
	for _, p := range l.NamedParameters() {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"weight", "bias"}, names)
	nb := nn.NewLinear(nn.Init{Device: d, Gen: tensor.NewGenerator(3)}, 3, 2, false)
	assert.Len(t, nb.NamedParameters(), 1)
	assert.Equal(t, int64(6*4), nn.ParameterBytes(nb))
	l.Release()
	nb.Release()
	requireEmpty(t, d)
}

func TestLinearHalfParameters(t *testing.T) {
	d := newCPU(t)
	l := nn.NewLinear(nn.Init{Device: d, DType: dtype.F16, Gen: tensor.NewGenerator(1)}, 8, 4, true)
	require.Equal(t, dtype.F16, l.Weight.DType())
	requireLive(t, d, "F16 parameters are 2 bytes an element", 8*4*2, 4*2)
	l.Release()
	requireEmpty(t, d)
}

func TestInitErrors(t *testing.T) {
	d := newCPU(t)
	require.Error(t, tensor.Try(func() { nn.NewLinear(nn.Init{Device: d}, 2, 2, true) }), "no generator")
	require.Error(t, tensor.Try(func() { nn.NewLinear(nn.Init{Gen: tensor.NewGenerator(1)}, 2, 2, true) }), "no device")
	require.Error(t, tensor.Try(func() { nn.NewMLP(nn.Init{Device: d, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: []int{3}}) }))
	requireEmpty(t, d)
}

// A Linear with no input features has a zero bias and gives zeros, as PyTorch's (its
// bias bound is 0 when fan_in is 0, not 1/√0).
func TestLinearWithoutInputs(t *testing.T) {
	d := newCPU(t)
	l := nn.NewLinear(nn.Init{Device: d, Gen: tensor.NewGenerator(1)}, 0, 3, true)
	assert.Equal(t, []float32{0, 0, 0}, vals(l.Bias))
	s := tensor.NewScope()
	y := l.Forward(tensor.FromSlice(s, d, dtype.F32, []float32{}).Reshape(2, 0))
	assert.Equal(t, []int{2, 3}, y.Shape())
	assert.Equal(t, []float32{0, 0, 0, 0, 0, 0}, vals(y))
	s.Close()
	l.Release()
	requireEmpty(t, d)
}

// A constructor that runs out of memory for a later parameter releases the earlier ones.
func TestConstructorsReleaseWhatTheyMadeOnOOM(t *testing.T) {
	const mib = 1 << 20
	for name, c := range map[string]struct {
		capacity int64
		build    func(init nn.Init)
	}{
		// The weight (12 MiB, a segment of its own) fills the device; the bias needs more.
		"Linear":    {12 * mib, func(init nn.Init) { nn.NewLinear(init, 1024, 3*mib/1024, true) }},
		"LayerNorm": {12 * mib, func(init nn.Init) { nn.NewLayerNorm(init, 3*mib) }},
		// The first Linear (12 MiB and a 2 MiB segment for its bias) fits, the second not.
		"MLP": {14 * mib, func(init nn.Init) { nn.NewMLP(init, nn.MLPConfig{Sizes: []int{1024, 3 * mib / 1024, 1024}}) }},
	} {
		t.Run(name, func(t *testing.T) {
			d := tensortest.Sim(t, c.capacity, false)
			err := tensor.Try(func() { c.build(nn.Init{Device: d, Gen: tensor.NewGenerator(1)}) })
			var oom *alloc.OOMError
			require.ErrorAs(t, err, &oom)
			requireEmpty(t, d)
		})
	}
}

// opNames is an OpHook that lists the ops a scope ran.
type opNames struct{ ops []string }

func (o *opNames) OpBegin(op string, _ device.Device) uint64 { o.ops = append(o.ops, op); return 0 }
func (o *opNames) OpEnd(uint64)                              {}

// A Sequential runs a Linear and the ReLU after it as one op, tensor.LinearActivation,
// and gives what running its children one by one gives: the same output and gradients,
// bit for bit on the CPU; GELU (the erf form has no epilogue, the tanh form's measured
// slower than the two ops), Tanh and a Linear last stay ops of their own.
func TestSequentialFoldsLinearActivations(t *testing.T) {
	d := newCPU(t)
	init := nn.Init{Device: d, Gen: tensor.NewGenerator(3)}
	m := nn.NewSequential(nn.NewLinear(init, 5, 8, true), nn.ReLU{}, nn.NewLinear(init, 8, 8, false), nn.GELU{Tanh: true},
		nn.NewLinear(init, 8, 8, true), nn.GELU{}, nn.NewLinear(init, 8, 8, true), nn.Tanh{}, nn.NewLinear(init, 8, 3, true))
	// run returns the ops of the forward, its output and the parameters' gradients.
	run := func(forward func(x *tensor.Tensor) *tensor.Tensor) (ops []string, out []float32, grads [][]float32) {
		hook := &opNames{}
		s := tensor.NewScope(tensor.WithOpHook(hook))
		x := f32(s, d, []float32{0.3, -1, 2, 0.5, -0.25, 1, 1.5, -2, 0.75, 0.1}, 2, 5)
		from := len(hook.ops)
		y := forward(x)
		ops = hook.ops[from:]
		out = vals(y)
		y.Sum().Backward()
		for _, p := range nn.Parameters(m) {
			grads = append(grads, vals(p.Grad()))
			p.ZeroGrad(true)
		}
		s.Close()
		return ops, out, grads
	}
	ops, out, grads := run(m.Forward)
	require.Equal(t, []string{tensor.OpLinearRelu, tensor.OpLinear, tensor.OpGelu, tensor.OpLinear, tensor.OpGelu, tensor.OpLinear,
		tensor.OpTanh, tensor.OpLinear}, ops)
	oneByOne := func(x *tensor.Tensor) *tensor.Tensor {
		for _, c := range m.Children {
			x = c.Forward(x)
		}
		return x
	}
	_, wantOut, wantGrads := run(oneByOne)
	require.Equal(t, wantOut, out)
	require.Equal(t, wantGrads, grads)
	m.Release()
	requireEmpty(t, d)
}

// Checkpointed, a Sequential's folded ops are recomputed (or, as a selective policy
// says, kept: LinearRelu's result, which is what its ReLU saves) and give the plain
// backward's gradients.
func TestSequentialFoldsUnderCheckpoint(t *testing.T) {
	d := newCPU(t)
	init := nn.Init{Device: d, Gen: tensor.NewGenerator(3)}
	m := nn.NewSequential(nn.NewLinear(init, 5, 8, true), nn.ReLU{}, nn.NewLinear(init, 8, 8, false), nn.GELU{Tanh: true}, nn.NewLinear(init, 8, 3, true))
	run := func(c *checkpoint.Config) [][]float32 {
		s := tensor.NewScope()
		x := f32(s, d, []float32{0.3, -1, 2, 0.5, -0.25, 1, 1.5, -2, 0.75, 0.1}, 2, 5).SetRequiresGrad(true)
		var y *tensor.Tensor
		if c == nil {
			y = m.Forward(x)
		} else {
			y = c.Checkpoint(m.Forward, x)
		}
		y.Sum().Backward()
		var g [][]float32
		for _, p := range nn.Parameters(m) {
			g = append(g, vals(p.Grad()))
			p.ZeroGrad(true)
		}
		g = append(g, vals(x.Grad()))
		s.Close()
		return g
	}
	want := run(nil)
	for _, c := range []*checkpoint.Config{{}, {Policy: checkpoint.SaveOps(tensor.OpLinearRelu)}, {Policy: checkpoint.SaveOps(tensor.OpLinearRelu, tensor.OpLinear)},
		{Policy: func(string, []*tensor.Tensor) checkpoint.Decision { return checkpoint.Save }}} {
		require.Equal(t, want, run(c))
	}
	m.Release()
	requireEmpty(t, d)
}
