package amp_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/amp"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

func linear(w, b *tensor.Tensor) func(x *tensor.Tensor) *tensor.Tensor {
	return func(x *tensor.Tensor) *tensor.Tensor { return tensor.Linear(x, w, b) }
}

// TestCastCachedUnderNoGradKeepsGradients is PyTorch issues 65766/112583: in one
// autocast region a weight is first used under no_grad, then by a recording forward,
// which reuses the cached cast. The gradient must still reach the weight.
func TestCastCachedUnderNoGradKeepsGradients(t *testing.T) {
	d := tensortest.CPU(t)
	w := param(d, []float32{1, 2, 3, 4}, 2, 2)
	root := tensor.NewScope()
	x := f32(root, d, []float32{0.5, 2}, 1, 2)
	ac := autocast(t, root, dtype.F16)

	ng := ac.Child(tensor.NoGrad())
	y0 := tensor.Layer(ng.Bind(x), linear(w, nil))
	require.False(t, y0.RequiresGrad())
	require.Equal(t, []float32{4.5, 9.5}, vals(y0))
	cached := amp.CacheBytes(ac)
	require.Equal(t, int64(4*2), cached, "the F16 cast of w is cached")
	ng.Close()

	before := tensortest.Requested(t, d)
	y := tensor.Layer(ac.Bind(x), linear(w, nil))
	require.Equal(t, 2*y.Bytes(), tensortest.Requested(t, d)-before, "the cached cast is reused: only the output and the input's F16 cast (saved for backward) are new")
	require.True(t, y.RequiresGrad(), "the cached cast carries the weight's history")
	y.Sum().Backward()
	require.Equal(t, []float32{0.5, 2, 0.5, 2}, vals(w.Grad()))
	root.Close()
	w.Release()
	tensortest.RequireEmpty(t, d)
}

// TestCacheBytesLikePyTorch replays PyTorch's measurement in docs/autocast.md: Linear(1024, 1024, bias=False) on
// a 1×1024 input, twice, under no_grad and F16 autocast: the first call adds the 2 MiB
// weight cast and the 2 KiB output, the second only its output; after the autocast
// scope closes only the input and the two outputs remain (8,192 B).
func TestCacheBytesLikePyTorch(t *testing.T) {
	d := tensortest.Meta(t)
	init := tensor.NewScope()
	w := init.Empty(d, dtype.F32, 1024, 1024).AsParameter()
	init.Close()
	root := tensor.NewScope(tensor.NoGrad())
	x := root.Empty(d, dtype.F32, 1, 1024)
	base := tensortest.Requested(t, d)
	ac := autocast(t, root, dtype.F16)
	y1 := tensor.Layer(ac.Bind(x), linear(w, nil))
	require.Equal(t, int64(2_099_200), tensortest.Requested(t, d)-base)
	y2 := tensor.Layer(ac.Bind(x), linear(w, nil))
	require.Equal(t, int64(2_099_200+2_048), tensortest.Requested(t, d)-base)
	require.Equal(t, int64(2*MiB), amp.CacheBytes(ac))
	ac.Keep(y1)
	ac.Keep(y2)
	ac.Close()
	require.Zero(t, amp.CacheBytes(ac))
	require.Equal(t, int64(8_192), tensortest.Requested(t, d)-w.Bytes(), "the input and the two outputs")
	root.Close()
	w.Release()
	tensortest.RequireEmpty(t, d)
}

// Under inference mode autocast caches nothing and reads nothing from the cache, as
// PyTorch 2.11 (its issue 158232): the measurement above keeps only the 2,048-byte
// output of each call, and a cast cached before is not used (nor changed) there.
func TestNoCacheUnderInferenceMode(t *testing.T) {
	d := tensortest.Meta(t)
	init := tensor.NewScope()
	w := init.Empty(d, dtype.F32, 1024, 1024).AsParameter()
	init.Close()
	for _, inferenceOutside := range []bool{false, true} {
		root := tensor.NewScope(tensor.InferenceMode(inferenceOutside))
		x := root.Empty(d, dtype.F32, 1, 1024)
		base := tensortest.Requested(t, d)
		ac := autocast(t, root, dtype.F16)
		inf := ac
		if !inferenceOutside {
			inf = ac.Child(tensor.InferenceMode(true))
		}
		tensor.Layer(inf.Bind(x), linear(w, nil))
		require.Equal(t, int64(2_048), tensortest.Requested(t, d)-base, "only the output: the weight's cast died with the op")
		y2 := tensor.Layer(inf.Bind(x), linear(w, nil))
		require.Equal(t, int64(2*2_048), tensortest.Requested(t, d)-base)
		require.Zero(t, amp.CacheBytes(ac))
		require.Equal(t, dtype.F16, y2.DType())
		if !inferenceOutside {
			// A recording forward in the same region caches as before; inference mode
			// then neither reads nor drops that cast.
			rec := ac.Child(tensor.NoGrad())
			tensor.Layer(rec.Bind(x), linear(w, nil))
			require.Equal(t, int64(2*MiB), amp.CacheBytes(ac))
			rec.Close()
			before := tensortest.Requested(t, d)
			tensor.Layer(inf.Bind(x), linear(w, nil))
			require.Equal(t, int64(2_048), tensortest.Requested(t, d)-before)
			require.Equal(t, int64(2*MiB), amp.CacheBytes(ac))
			inf.Close()
		}
		ac.Close()
		root.Close()
	}
	w.Release()
	tensortest.RequireEmpty(t, d)
}

// TestWhatIsCached checks the cacheability rule: only F32 leaves that require grad and
// cover their storage (parameters), only to the scope's autocast type, only with the
// cache enabled. Everything else is cast on every use.
func TestWhatIsCached(t *testing.T) {
	d := tensortest.CPU(t)
	w := param(d, seq(4, 1), 2, 2)
	big := param(d, seq(8, 1), 4, 2)
	root := tensor.NewScope()
	x := f32(root, d, seq(2, 1), 1, 2)
	frozen := f32(root, d, seq(4, 1), 2, 2)
	ng := root.Child(tensor.NoGrad())
	view := ng.Keep(ng.Bind(big).Slice(0, 0, 2)).SetRequiresGrad(true)
	ng.Close()
	h16 := tensor.FromSlice(root, d, dtype.F16, seq(4, 1), 2, 2).SetRequiresGrad(true)
	ac := autocast(t, root, dtype.F16)
	activation := ac.Bind(x).MulScalar(1)

	for _, c := range []struct {
		name   string
		weight *tensor.Tensor
	}{
		{"a weight that requires no grad", frozen},
		{"a leaf that is a view", view},
		{"an activation (not a leaf)", activation.T().Reshape(2, 1).MatMul(activation)},
		{"a leaf already F16", h16},
	} {
		before := tensortest.Requested(t, d)
		y := tensor.Linear(ac.Bind(x), c.weight, nil)
		require.Zero(t, amp.CacheBytes(ac), c.name)
		saved := int64(0)
		if c.weight.RequiresGrad() {
			saved = 4 // the input's cast, which the graph keeps for the weight's gradient
		}
		require.Equal(t, saved+y.Bytes(), tensortest.Requested(t, d)-before,
			"%s: the output stays in the op's scope and the graph keeps what it saved; the casts are temporaries of the op", c.name)
	}

	noCache := autocast(t, ac, dtype.F16, amp.CacheEnabled(false))
	before := tensortest.Requested(t, d)
	tensor.Linear(noCache.Bind(x), w, nil)
	tensor.Linear(noCache.Bind(x), w, nil)
	require.Zero(t, amp.CacheBytes(ac), "cache disabled")
	require.Equal(t, int64(2*(4+4)), tensortest.Requested(t, d)-before, "each call: the input's cast the graph saved and the output")
	noCache.Close()

	bf := autocast(t, ac, dtype.BF16)
	tensor.Linear(bf.Bind(x), w, nil)
	bf.Close()
	tensor.Linear(ac.Bind(x), w, nil)
	tensor.Linear(ac.Bind(x), w, nil)
	require.Equal(t, int64(2*8), amp.CacheBytes(ac), "one cast per weight and type")
	root.Close()
	w.Release()
	big.Release()
	tensortest.RequireEmpty(t, d)
}

// TestCacheRecastsAWeightChangedInPlace: an optimizer step inside the region (the
// weight's version moves) makes the cached cast stale; the next use casts again and
// the stale cast is released.
func TestCacheRecastsAWeightChangedInPlace(t *testing.T) {
	d := tensortest.CPU(t)
	w := param(d, []float32{1, 2, 3, 4}, 2, 2)
	root := tensor.NewScope()
	x := f32(root, d, []float32{1, 1}, 1, 2)
	ac := autocast(t, root, dtype.F16)
	ng := ac.Child(tensor.NoGrad())
	require.Equal(t, []float32{3, 7}, vals(tensor.Layer(ng.Bind(x), linear(w, nil))))
	w.Fill(1)
	require.Equal(t, []float32{2, 2}, vals(tensor.Layer(ng.Bind(x), linear(w, nil))))
	require.Equal(t, int64(8), amp.CacheBytes(ac))
	root.Close()
	require.Equal(t, w.Bytes(), tensortest.Requested(t, d))
	w.Release()
	tensortest.RequireEmpty(t, d)
}

// TestCacheAcrossBackwards: graphs built on one cached cast in one region each reach
// the weight, in any order of forwards and backwards (gradient accumulation).
func TestCacheAcrossBackwards(t *testing.T) {
	d := tensortest.CPU(t)
	w := param(d, []float32{1, 2, 3, 4}, 2, 2)
	root := tensor.NewScope()
	x := f32(root, d, []float32{0.5, 2}, 1, 2)
	ac := autocast(t, root, dtype.F16)
	loss := func() *tensor.Tensor { return tensor.Layer(ac.Bind(x), linear(w, nil)).Sum() }
	loss().Backward()
	a, b := loss(), loss()
	b.Backward()
	a.Backward()
	require.Equal(t, int64(8), amp.CacheBytes(ac), "one cast of w for all three")
	require.Equal(t, []float32{1.5, 6, 1.5, 6}, vals(w.Grad()))
	root.Close()
	w.Release()
	tensortest.RequireEmpty(t, d)
}

// TestCacheSharedByGoroutines: scopes of one region used by several goroutines at
// once cast a weight once, evaluating and backpropagating through it.
func TestCacheSharedByGoroutines(t *testing.T) {
	d := tensortest.CPU(t)
	w := param(d, seq(64*64, 1.0/1024), 64, 64)
	root := tensor.NewScope()
	x := f32(root, d, seq(64, 1.0/64), 1, 64)
	ac := autocast(t, root, dtype.F16)
	want := vals(tensor.Layer(ac.Bind(x), linear(w, nil)))
	var wg sync.WaitGroup
	for i := range 8 {
		var c *tensor.Scope
		if i%2 == 0 {
			c = ac.Child(tensor.NoGrad())
		} else {
			c = ac.Child()
		}
		xc := c.Bind(x)
		wg.Go(func() {
			defer c.Close()
			for range 10 {
				y := tensor.Layer(xc, linear(w, nil))
				assert.Equal(t, want, vals(y))
				if y.RequiresGrad() {
					y.Sum().Backward()
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(64*64*2), amp.CacheBytes(ac))
	// 40 backwards of Σ x·wᵀ: every row of w's gradient is 40·x.
	g, xs := vals(w.Grad()), vals(x)
	for j := range 64 {
		require.InDelta(t, 40*xs[j], g[63*64+j], 1e-3)
	}
	root.Close()
	w.Release()
	tensortest.RequireEmpty(t, d)
}
