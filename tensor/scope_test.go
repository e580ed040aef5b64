package tensor_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
)

func TestScopeCloseKeepAndNesting(t *testing.T) {
	d := newCPU(t)
	root := tensor.NewScope()
	x := root.Ones(d, dtype.F32, 4)

	child := root.Child()
	xc := child.Bind(x)
	require.Same(t, child, xc.Scope())
	require.Same(t, x.Storage(), xc.Storage(), "Bind shares the storage")
	tmp := xc.MulScalar(2)
	y := xc.Add(tmp)
	require.Same(t, child, y.Scope(), "a result belongs to the innermost scope of its inputs")
	require.Same(t, y, child.Keep(y))
	require.Same(t, root, y.Scope(), "Keep moves to the parent")
	child.Close()
	require.True(t, tmp.Released())
	require.True(t, xc.Released())
	require.False(t, x.Released(), "Bind's handle goes, the original stays")
	require.False(t, y.Released())
	require.Equal(t, []float32{3, 3, 3, 3}, vals(y))
	require.Equal(t, x.Bytes()+y.Bytes(), requested(t, d))

	// A root's Keep hands the tensor to the caller.
	kept := root.Keep(y)
	require.Nil(t, kept.Scope())
	// Closing a parent closes its open children.
	c1 := root.Child()
	c2 := c1.Child(tensor.NoGrad())
	z := c2.Bind(x).Exp()
	root.Close()
	require.True(t, c1.Closed() && c2.Closed())
	require.True(t, z.Released())
	require.False(t, kept.Released())
	require.Equal(t, y.Bytes(), requested(t, d))
	kept.Release()
	kept.Release() // idempotent
	root.Close()   // idempotent
	requireEmpty(t, d)
}

func TestScopeErrors(t *testing.T) {
	d := newCPU(t)
	a, b := tensor.NewScope(), tensor.NewScope()
	x, y := a.Ones(d, dtype.F32, 2), b.Ones(d, dtype.F32, 2)
	requireOpError(t, tensor.OpAdd, tensor.ErrScope, func() { x.Add(y) })
	c1, c2 := a.Child(), a.Child()
	requireOpError(t, tensor.OpAdd, tensor.ErrScope, func() { c1.Bind(x).Add(c2.Bind(x)) })
	requireOpError(t, "Keep", tensor.ErrScope, func() { b.Keep(x) })
	c1.Close()
	c2.Close()

	p := a.Ones(d, dtype.F32, 2).AsParameter()
	require.Nil(t, p.Scope())
	e := requireOpError(t, tensor.OpExp, tensor.ErrScope, func() { p.Exp() })
	require.Contains(t, e.Error(), "s.Bind(t)")
	require.Equal(t, [][]int{{2}}, e.Shapes)
	require.Equal(t, []dtype.DType{dtype.F32}, e.DTypes)
	require.Equal(t, "cpu", e.Device)
	require.Same(t, a, p.Add(x).Scope(), "a parameter with an activation lands in the activation's scope")

	closed := a.Child()
	closed.Close()
	requireOpError(t, "Child", tensor.ErrScope, func() { closed.Child() })
	requireOpError(t, "Full", tensor.ErrScope, func() { closed.Ones(d, dtype.F32, 1) })
	a.Close()
	b.Close()
	p.Release()
	requireEmpty(t, d)
}

func TestReleaseAndUseAfterRelease(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := s.Ones(d, dtype.F32, 2, 2)
	v := x.T()
	x.Release()
	require.Equal(t, int64(16), requested(t, d), "the view still holds the storage")
	require.Equal(t, 1, s.Len())
	e := requireOpError(t, tensor.OpExp, tensor.ErrReleased, func() { x.Exp() })
	require.Contains(t, e.Error(), "released")
	requireOpError(t, tensor.OpAdd, tensor.ErrReleased, func() { v.Add(x) })
	requireOpError(t, "ToSlice", tensor.ErrReleased, func() { vals(x) })
	v.Release()
	requireEmpty(t, d)
	require.Zero(t, s.Len())
	s.Close()
}

func TestTryOnlyRecoversTensorErrors(t *testing.T) {
	require.NoError(t, tensor.Try(func() {}))
	require.PanicsWithValue(t, "boom", func() { _ = tensor.Try(func() { panic("boom") }) })
}

func TestLayerFreesTemporariesAtTheBoundary(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope(tensor.NoGrad())
	x := s.Ones(d, dtype.F32, 8)
	var inside int64
	y := tensor.Layer(x, func(x *tensor.Tensor) *tensor.Tensor {
		h := x.Exp().MulScalar(2).AddScalar(1)
		inside = requested(t, d)
		return h.Tanh()
	})
	require.Equal(t, 4*x.Bytes(), inside, "x and three temporaries during the layer")
	require.Equal(t, x.Bytes()+y.Bytes(), requested(t, d), "only x and the result after it")
	require.Same(t, s, y.Scope())
	identity := tensor.Layer(x, func(x *tensor.Tensor) *tensor.Tensor { return x })
	require.Same(t, x.Storage(), identity.Storage())
	s.Close()
	requireEmpty(t, d)
}

func TestCloseFromAnotherGoroutine(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	for range 50 {
		s.Ones(d, dtype.F32, 3)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(s.Close)
	}
	wg.Wait()
	requireEmpty(t, d)
}

// Close may come from another goroutine while the scope's own goroutine is still
// releasing handles (a timeout closing a worker's scope, say): each handle is dropped
// once, and the race detector finds nothing.
func TestCloseWhileTheOwnerReleases(t *testing.T) {
	d := newCPU(t)
	for range 20 {
		s := tensor.NewScope()
		xs := make([]*tensor.Tensor, 20)
		for i := range xs {
			xs[i] = s.Ones(d, dtype.F32, 3)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			for _, x := range xs {
				x.Release()
			}
		})
		wg.Go(s.Close)
		wg.Wait()
		for _, x := range xs {
			require.True(t, x.Released())
			require.Nil(t, x.Scope(), "a released handle has no owner")
		}
	}
	requireEmpty(t, d)
}

// A child inherits its parent's modes and overrides those its options set.
func TestChildInheritsModes(t *testing.T) {
	g := tensor.NewGenerator(1)
	root := tensor.NewScope(tensor.WithGenerator(g), tensor.WithAnomaly(true))
	require.Nil(t, root.Parent())
	require.True(t, root.GradEnabled())
	require.Nil(t, root.SavedHooks())
	require.Nil(t, root.Autocast())
	c := root.Child(tensor.NoGrad())
	require.Same(t, root, c.Parent())
	require.Same(t, g, c.Generator())
	require.True(t, c.Anomaly())
	require.False(t, c.GradEnabled())
	cc := c.Child(tensor.WithAnomaly(false), tensor.WithGenerator(nil))
	require.False(t, cc.GradEnabled())
	require.False(t, cc.Anomaly())
	require.Nil(t, cc.Generator())
	require.True(t, root.Anomaly(), "a child's options leave the parent alone")
	root.Close()
	require.True(t, cc.Closed())
}

// OnClose callbacks run last registered first, after the children closed and before
// the scope releases its handles, so that one may still Keep them.
func TestOnCloseRunsBeforeTheHandlesGo(t *testing.T) {
	d := newCPU(t)
	root := tensor.NewScope()
	s := root.Child()
	x := s.Ones(d, dtype.F32, 2)
	child := s.Child()
	var order []string
	s.OnClose(func() {
		order = append(order, "first")
		require.True(t, child.Closed(), "children close first")
		require.False(t, x.Released())
		s.Keep(x)
	})
	s.OnClose(func() { order = append(order, "second") })
	s.Close()
	require.Equal(t, []string{"second", "first"}, order)
	require.False(t, x.Released(), "kept by a callback")
	require.Same(t, root, x.Scope())
	requireOpError(t, "OnClose", tensor.ErrScope, func() { s.OnClose(func() {}) })
	s.Close()
	require.Len(t, order, 2, "a second Close runs nothing")
	root.Close()
	require.True(t, x.Released())
	requireEmpty(t, d)
}

// Layer refuses an input no scope owns and a result that would outlive nothing: one
// owned by another tree, a nested scope of the layer's, or no scope. What the layer
// made is released either way.
func TestLayerErrors(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := s.Ones(d, dtype.F32, 3)
	p := s.Ones(d, dtype.F32, 3).AsParameter()
	other := tensor.NewScope()
	before := requested(t, d)
	requireOpError(t, "Layer", tensor.ErrScope, func() { tensor.Layer(p, func(x *tensor.Tensor) *tensor.Tensor { return x }) })
	for name, f := range map[string]func(x *tensor.Tensor) *tensor.Tensor{
		"another tree":   func(x *tensor.Tensor) *tensor.Tensor { return other.Ones(d, dtype.F32, 1) },
		"a nested scope": func(x *tensor.Tensor) *tensor.Tensor { return x.Scope().Child().Bind(x).Exp() },
		"no scope":       func(x *tensor.Tensor) *tensor.Tensor { return p },
	} {
		e := requireOpError(t, "Layer", tensor.ErrScope, func() { tensor.Layer(x, f) })
		require.Contains(t, e.Error(), "return one computed in the layer's scope", name)
	}
	require.Equal(t, before+4, requested(t, d), "only other's tensor is left")
	other.Close()
	require.Equal(t, before, requested(t, d))
	// A result owned by the input's scope (or one enclosing it) is returned as it is.
	y := s.Ones(d, dtype.F32, 1)
	require.Same(t, y, tensor.Layer(x, func(*tensor.Tensor) *tensor.Tensor { return y }))
	requireOpError(t, "Keep", tensor.ErrScope, func() { s.Keep(s.Keep(x)) })
	p.Release()
	x.Release()
	s.Close()
	requireEmpty(t, d)
}

// A callback or a child's Close that panics does not leave the scope half closed: the
// other children close, the other callbacks run, every handle is released, then the
// panic goes on (a Keep into a parent that is closing is such a panic: the handle is
// released with the parent).
func TestClosePanickingStillReleasesEverything(t *testing.T) {
	d := newCPU(t)
	root := tensor.NewScope()
	root.Ones(d, dtype.F32, 4)
	older := root.Child()
	older.Ones(d, dtype.F32, 3)
	s := root.Child()
	x := s.Ones(d, dtype.F32, 2)
	s.OnClose(func() { s.Keep(x) })
	ran := false
	root.OnClose(func() { ran = true })
	root.OnClose(func() { panic(&tensor.Error{Op: "callback", Err: tensor.ErrScope}) })
	err := tensor.Try(root.Close)
	require.ErrorIs(t, err, tensor.ErrScope)
	require.True(t, older.Closed())
	require.True(t, ran, "the other callback ran")
	require.True(t, x.Released())
	require.True(t, root.Closed())
	root.Close()
	requireEmpty(t, d)
}
