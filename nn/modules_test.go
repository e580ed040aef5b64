package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
)

func TestActivations(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	in := []float32{-2, -0.5, 0, 0.5, 2}
	x := f32(s, d, in)
	for _, tc := range []struct {
		m    nn.Module
		want func(float64) float64
	}{
		{nn.ReLU{}, func(v float64) float64 { return math.Max(v, 0) }},
		{nn.Tanh{}, math.Tanh},
		{nn.GELU{}, func(v float64) float64 { return v / 2 * (1 + math.Erf(v/math.Sqrt2)) }},
		{nn.GELU{Tanh: true}, func(v float64) float64 {
			return v / 2 * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
		}},
	} {
		got := vals(tc.m.Forward(x))
		for i, v := range in {
			assert.InDelta(t, tc.want(float64(v)), got[i], 1e-6, "%T at %v", tc.m, v)
		}
		assert.Empty(t, tc.m.NamedParameters())
		tc.m.SetTraining(false)
		tc.m.Release()
	}
	s.Close()
	requireEmpty(t, d)
}

func TestDropoutTrainAndEval(t *testing.T) {
	d := newCPU(t)
	const n, p = 4000, 0.25
	drop := nn.NewDropout(p)
	run := func(seed uint64) []float32 {
		s := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(seed)))
		defer s.Close()
		return vals(drop.Forward(s.Ones(d, dtype.F32, n)))
	}
	got := run(5)
	zeros := 0
	for _, v := range got {
		if v == 0 {
			zeros++
			continue
		}
		require.InDelta(t, 1/(1-p), v, 1e-6, "kept elements are scaled by 1/(1-p)")
	}
	assert.InDelta(t, p, float64(zeros)/n, 0.03)
	assert.Equal(t, got, run(5), "the same generator state draws the same mask")
	assert.NotEqual(t, got, run(6))

	s := tensor.NewScope()
	x := s.Ones(d, dtype.F32, 8)
	require.Error(t, tensor.Try(func() { drop.Forward(x) }), "training dropout needs the scope's generator")
	drop.SetTraining(false)
	y := drop.Forward(x)
	assert.Same(t, x, y, "evaluation mode is the identity")
	s.Close()
	requireEmpty(t, d)
}

func TestLayerNorm(t *testing.T) {
	d := newCPU(t)
	ln := nn.NewLayerNorm(nn.Init{Device: d}, 4)
	assert.Equal(t, []float32{1, 1, 1, 1}, vals(ln.Weight))
	assert.Equal(t, []float32{0, 0, 0, 0}, vals(ln.Bias))
	requireLive(t, d, "after NewLayerNorm", 16, 16)
	s := tensor.NewScope()
	x := f32(s, d, []float32{1, 2, 3, 4, -1, 0, 0, 5}, 2, 4)
	got := vals(ln.Forward(x))
	xs := vals(x)
	for r := range 2 {
		row := xs[r*4 : r*4+4]
		var mean, v float64
		for _, e := range row {
			mean += float64(e) / 4
		}
		for _, e := range row {
			v += (float64(e) - mean) * (float64(e) - mean) / 4
		}
		for i, e := range row {
			assert.InDelta(t, (float64(e)-mean)/math.Sqrt(v+nn.DefaultLayerNormEps), got[r*4+i], 1e-5)
		}
	}
	s.Close()
	var names []string
	for _, p := range ln.NamedParameters() {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"weight", "bias"}, names)
	ln.Release()
	requireEmpty(t, d)
}

func TestEmbedding(t *testing.T) {
	d := newCPU(t)
	e := nn.NewEmbedding(nn.Init{Device: d, Gen: tensor.NewGenerator(2)}, 10, 3)
	w := vals(e.Weight)
	s := tensor.NewScope()
	idx := tensor.FromSlice(s, d, dtype.I64, []int64{4, 0, 4, 9}, 2, 2)
	out := e.Forward(idx)
	require.Equal(t, []int{2, 2, 3}, out.Shape())
	got := vals(out)
	for i, row := range []int{4, 0, 4, 9} {
		assert.Equal(t, w[row*3:row*3+3], got[i*3:i*3+3])
	}
	out.Sum().Backward()
	g := vals(e.Weight.Grad())
	for row := range 10 {
		want := map[int]float32{4: 2, 0: 1, 9: 1}[row]
		assert.Equal(t, []float32{want, want, want}, g[row*3:row*3+3], "row %d is gathered %v times", row, want)
	}
	s.Close()
	require.Equal(t, []nn.Parameter{{Name: "weight", Tensor: e.Weight}}, e.NamedParameters())
	e.SetTraining(false)
	s = tensor.NewScope(tensor.NoGrad())
	assert.Equal(t, w[3:6], vals(e.Forward(tensor.FromSlice(s, d, dtype.I64, []int64{1}))), "evaluation mode gathers the same rows")
	s.Close()
	e.Release()
	requireEmpty(t, d)
}

func TestEmbeddingInitIsStandardNormal(t *testing.T) {
	d := newCPU(t)
	e := nn.NewEmbedding(nn.Init{Device: d, Gen: tensor.NewGenerator(9)}, 100, 50)
	var sum, sq float64
	w := vals(e.Weight)
	for _, v := range w {
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	assert.InDelta(t, 0, sum/float64(len(w)), 0.05)
	assert.InDelta(t, 1, sq/float64(len(w)), 0.05)
	e.Release()
	require.Error(t, tensor.Try(func() { nn.NewEmbedding(nn.Init{Device: d}, 2, 2) }), "no generator")
	requireEmpty(t, d)
}

func TestLosses(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	logits := f32(s, d, []float32{1, 2, 0.5, -1, 0, 3}, 2, 3)
	labels := tensor.FromSlice(s, d, dtype.I64, []int64{1, 2}, 2)
	var want float64
	ls := vals(logits)
	for r, y := range []int{1, 2} {
		row := ls[r*3 : r*3+3]
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v))
		}
		want += (math.Log(z) - float64(row[y])) / 2
	}
	var ce nn.Loss = nn.CrossEntropyLoss{}
	assert.InDelta(t, want, ce.Loss(logits, labels).Item(), 1e-6)

	a := f32(s, d, []float32{1, 2, 3})
	b := f32(s, d, []float32{0, 2, 5})
	var mse nn.Loss = nn.MSELoss{}
	assert.InDelta(t, (1+0+4)/3.0, mse.Loss(a, b).Item(), 1e-6)
	s.Close()
	requireEmpty(t, d)
}

func TestSequentialNamesAndModes(t *testing.T) {
	d := newCPU(t)
	m := nn.NewMLP(nn.Init{Device: d, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: []int{4, 8, 6, 2}, Dropout: 0.5})
	var names []string
	for _, p := range m.NamedParameters() {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"0.weight", "0.bias", "3.weight", "3.bias", "6.weight", "6.bias"}, names,
		"Linear, ReLU, Dropout, Linear, ReLU, Dropout, Linear")
	require.Len(t, m.Children, 7)
	assert.IsType(t, nn.ReLU{}, m.Children[1])
	assert.Equal(t, int64((4*8+8+8*6+6+6*2+2)*4), nn.ParameterBytes(m))
	assert.Len(t, nn.Parameters(m), 6)

	s := tensor.NewScope()
	x := s.Ones(d, dtype.F32, 3, 4)
	require.Error(t, tensor.Try(func() { m.Forward(x) }), "dropout in training mode needs a generator")
	m.SetTraining(false)
	first := vals(m.Forward(x))
	assert.Equal(t, first, vals(m.Forward(x)), "evaluation mode is deterministic")
	nested := nn.NewSequential(nn.NewSequential(m.Children[:3]...), nn.NewSequential(m.Children[3:]...))
	assert.Equal(t, first, vals(nested.Forward(x)), "nesting changes nothing")
	assert.Equal(t, "1.0.weight", nested.NamedParameters()[2].Name)
	s.Close()
	m.Release()
	m.Release()
	requireEmpty(t, d)
}

// TestMLPForwardMatchesReference computes an MLP's logits on the host in float64.
func TestMLPForwardMatchesReference(t *testing.T) {
	d := newCPU(t)
	sizes := []int{3, 5, 4, 2}
	m := nn.NewMLP(nn.Init{Device: d, Gen: tensor.NewGenerator(11)}, nn.MLPConfig{Sizes: sizes, Activation: func() nn.Module { return nn.Tanh{} }})
	s := tensor.NewScope()
	xs := []float32{0.5, -1, 2, 1, 1, 1}
	got := vals(m.Forward(f32(s, d, xs, 2, 3)))
	h := make([]float64, len(xs))
	for i, v := range xs {
		h[i] = float64(v)
	}
	for l := range 3 {
		lin := m.Children[2*l].(*nn.Linear)
		w, b := vals(lin.Weight), vals(lin.Bias)
		in, out := sizes[l], sizes[l+1]
		next := make([]float64, 2*out)
		for r := range 2 {
			for o := range out {
				v := float64(b[o])
				for k := range in {
					v += h[r*in+k] * float64(w[o*in+k])
				}
				if l < 2 {
					v = math.Tanh(v)
				}
				next[r*out+o] = v
			}
		}
		h = next
	}
	for i := range h {
		assert.InDelta(t, h[i], got[i], 1e-5)
	}
	s.Close()
	m.Release()
	requireEmpty(t, d)
}

// TestModuleGradientsMatchFiniteDifferences perturbs every parameter of a small model
// (Linear, LayerNorm, GELU, Linear, Tanh, Linear, cross entropy) and compares the
// central difference of the loss with the gradient backward gave.
func TestModuleGradientsMatchFiniteDifferences(t *testing.T) {
	d := newCPU(t)
	init := nn.Init{Device: d, Gen: tensor.NewGenerator(4)}
	m := nn.NewSequential(nn.NewLinear(init, 3, 4, true), nn.NewLayerNorm(init, 4), nn.GELU{},
		nn.NewLinear(init, 4, 4, true), nn.Tanh{}, nn.NewLinear(init, 4, 3, false))
	xs := []float32{0.3, -0.7, 1.1, 0.9, 0.2, -0.4, -1, 0.5, 0.25}
	loss := func() (float64, *tensor.Scope, *tensor.Tensor) {
		s := tensor.NewScope()
		x := f32(s, d, xs, 3, 3)
		labels := tensor.FromSlice(s, d, dtype.I64, []int64{0, 2, 1}, 3)
		l := nn.CrossEntropyLoss{}.Loss(m.Forward(x), labels)
		return l.Item(), s, l
	}
	_, s, l := loss()
	l.Backward()
	s.Close()

	const eps = 1e-2
	for _, p := range m.NamedParameters() {
		grad := vals(p.Tensor.Grad())
		orig := vals(p.Tensor)
		for i := range orig {
			at := func(v float32) float64 {
				ps := tensor.NewScope()
				defer ps.Close()
				mod := append([]float32(nil), orig...)
				mod[i] = v
				p.Tensor.CopyFrom(f32(ps, d, mod, p.Tensor.Shape()...))
				f, s, _ := loss()
				s.Close()
				return f
			}
			num := (at(orig[i]+eps) - at(orig[i]-eps)) / (2 * eps)
			at(orig[i])
			assert.InDelta(t, num, grad[i], 2e-3+2e-2*math.Abs(num), "%s[%d]", p.Name, i)
		}
	}
	m.Release()
	requireEmpty(t, d)
}
