package tensor_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/autograd"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

// repack is a saved-tensor hook pair that gives back what it was given through f.
type repack struct {
	pack, unpack func(x *tensor.Tensor) *tensor.Tensor
}

func (r repack) run(v autograd.Value, f func(x *tensor.Tensor) *tensor.Tensor) (autograd.Value, error) {
	var out *tensor.Tensor
	err := tensor.Try(func() {
		s := tensor.NewScope(tensor.NoGrad())
		defer s.Close()
		out = s.Keep(f(s.Bind(v.(*tensor.Tensor))))
	})
	return out, err
}

func (r repack) Pack(v autograd.Value) (autograd.Value, error) {
	defer v.Release()
	return r.run(v, r.pack)
}

func (r repack) Unpack(p autograd.Value) (autograd.Value, error) { return r.run(p, r.unpack) }

// Saved-tensor hooks may give a saved tensor back in another layout (a strided view):
// every rule reads it in its logical order, so the gradients are those without hooks.
func TestUnpackedTensorsInAnotherLayout(t *testing.T) {
	d := newCPU(t)
	r := rand.New(rand.NewPCG(1, 1))
	data := make([]float32, 4*6)
	for i := range data {
		data[i] = float32(r.NormFloat64())
	}
	// Saved tensors come back as strided views of a stacked copy: same shape and type.
	strided := repack{
		pack:   func(x *tensor.Tensor) *tensor.Tensor { return tensor.Stack(-1, x, x) },
		unpack: func(p *tensor.Tensor) *tensor.Tensor { return p.Slice(-1, 1, 2).Squeeze(-1) },
	}
	ops := map[string]func(s *tensor.Scope, x *tensor.Tensor) *tensor.Tensor{
		"LayerNorm": func(_ *tensor.Scope, x *tensor.Tensor) *tensor.Tensor { return tensor.LayerNorm(x, nil, nil, 1e-5) },
		"CrossEntropy": func(s *tensor.Scope, x *tensor.Tensor) *tensor.Tensor {
			return tensor.CrossEntropy(x, tensor.FromSlice(s, d, dtype.I64, []int64{1, 5, 0, 3}))
		},
		"Max":     func(_ *tensor.Scope, x *tensor.Tensor) *tensor.Tensor { return x.Max(1) },
		"Softmax": func(_ *tensor.Scope, x *tensor.Tensor) *tensor.Tensor { return x.Softmax(1) },
		"Embedding": func(s *tensor.Scope, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Embedding(x, tensor.FromSlice(s, d, dtype.I64, []int64{3, 0, 3}))
		},
	}
	for name, op := range ops {
		grad := func(opts ...tensor.Option) []float32 {
			s := tensor.NewScope()
			defer s.Close()
			x := f32(s, d, data, 4, 6).SetRequiresGrad(true)
			c := s.Child(opts...)
			y := op(c, c.Bind(x))
			y.BackwardWith(tensor.BackwardOptions{Grad: c.Ones(d, dtype.F32, y.Shape()...)})
			return vals(x.Grad())
		}
		require.Equal(t, grad(), grad(tensor.WithSavedHooks(strided)), name)
	}
	requireEmpty(t, d)
}

// An unpack hook that gives back another type or shape than it packed fails the
// backward naming the op and both (the rules would read its bytes as what was saved);
// nothing leaks.
func TestUnpackedTensorOfAnotherTypeOrShapeIsAnError(t *testing.T) {
	d := newCPU(t)
	for name, h := range map[string]repack{
		"type": {pack: func(x *tensor.Tensor) *tensor.Tensor { return x.Cast(dtype.BF16) },
			unpack: func(p *tensor.Tensor) *tensor.Tensor { return p }},
		"shape": {pack: func(x *tensor.Tensor) *tensor.Tensor { return x.Contiguous() },
			unpack: func(p *tensor.Tensor) *tensor.Tensor { return p.Reshape(-1) }},
	} {
		s := tensor.NewScope()
		x := s.Ones(d, dtype.F32, 4, 6).SetRequiresGrad(true)
		c := s.Child(tensor.WithSavedHooks(h))
		y := tensor.LayerNorm(c.Bind(x), nil, nil, 1e-5).Sum()
		err := tensor.Try(y.Backward)
		require.ErrorIs(t, err, tensor.ErrGrad, name)
		require.Contains(t, err.Error(), "LayerNorm: backward: an unpack hook returned", name)
		require.Contains(t, err.Error(), "saved as [4 6] float32", name)
		require.Nil(t, x.Grad())
		s.Close()
		requireEmpty(t, d)
	}
}

// inputLog is saved-tensor hooks that change nothing and an OpCache that computes
// every op and keeps the inputs it is told of.
type inputLog struct {
	repack
	ins [][]*tensor.Tensor
}

func (l *inputLog) Result(string, []*tensor.Tensor) (*tensor.Tensor, error) { return nil, nil }

func (l *inputLog) Ran(_ string, in []*tensor.Tensor, _ *tensor.Tensor) { l.ins = append(l.ins, in) }

// An OpCache may keep the inputs an op tells it of: later ops do not change them.
func TestOpCacheKeepsTheInputsItIsTold(t *testing.T) {
	d := newCPU(t)
	same := func(x *tensor.Tensor) *tensor.Tensor { return x }
	l := &inputLog{repack: repack{same, same}}
	s := tensor.NewScope(tensor.WithSavedHooks(l))
	a := s.Ones(d, dtype.F32, 3).SetRequiresGrad(true)
	b := a.Exp()
	c := a.Mul(b)
	c.Add(b)
	require.Len(t, l.ins, 3)
	require.Equal(t, []*tensor.Tensor{a}, l.ins[0], "Exp")
	require.Equal(t, []*tensor.Tensor{a, b}, l.ins[1], "Mul")
	require.Equal(t, []*tensor.Tensor{c, b}, l.ins[2], "Add")
	s.Close()
	requireEmpty(t, d)
}
