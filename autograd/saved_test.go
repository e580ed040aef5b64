package autograd_test

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/autograd"
)

// offload is saved-tensor hooks that move saved values to "host" memory:
// pack copies to host and drops the device value, unpack copies back.
type offload struct {
	w              *world
	packs, unpacks int
}

func (o *offload) Pack(v autograd.Value) (autograd.Value, error) {
	o.packs++
	d := v.(interface{ base() *val }).base()
	h := o.w.newVal("host", d.label, d.x)
	v.Release()
	return h, nil
}

func (o *offload) Unpack(p autograd.Value) (autograd.Value, error) {
	o.unpacks++
	h := p.(*val)
	return o.w.newVal("saved", h.label, h.x), nil
}

func TestOffloadHooks(t *testing.T) {
	w, tp := toy(t)
	off := &offload{w: w}
	a := tp.param(2)
	tp.hooks = off
	y := tp.mul(a, tp.exp(a))
	tp.hooks = nil
	assert.Equal(t, 3, off.packs)
	assert.Zero(t, w.count("saved"), "nothing saved stays on the device")
	assert.Equal(t, 3, w.count("host"))

	opts := func(retain bool) autograd.Options {
		return autograd.Options{RetainGraph: retain, AfterNode: func(n *autograd.Node) {
			assert.Zero(t, w.count("saved"), "unpacked copies die with their node's run (%s)", n)
		}}
	}
	require.NoError(t, tp.backward(y, opts(true)))
	assert.Equal(t, 3, off.unpacks)
	assert.Equal(t, 3, w.count("host"), "retained: the packed copies stay")

	require.NoError(t, tp.backward(y, opts(false)))
	assert.Equal(t, 6, off.unpacks, "unpack runs again in every backward")
	assert.Zero(t, w.count("host"))
	assert.InDelta(t, 2*3*math.Exp(2), a.grad(), 1e-11)
}

// checkpoint is a toy non-reentrant checkpoint built on saved hooks: pack
// keeps only an empty holder, the first unpack in a backward re-runs the
// segment under refill hooks that hand each holder its recomputed value, and
// each holder gives its value up when unpacked.
type checkpoint struct {
	t          testing.TB
	w          *world
	fn         func(tp *tape, x *scalar) *scalar
	input      float64
	holders    []*holder
	recomputes int
}

type holder struct {
	tag *val // counts the holder as a live value
	v   *val // the recomputed value, until unpacked
}

func (h *holder) Release() {
	h.tag.Release()
	if h.v != nil {
		h.v.Release()
		h.v = nil
	}
}

func (c *checkpoint) run(tp *tape, x *scalar) *scalar {
	c.input = x.x
	prev := tp.hooks
	tp.hooks = c
	defer func() { tp.hooks = prev }()
	return c.fn(tp, x)
}

func (c *checkpoint) Pack(v autograd.Value) (autograd.Value, error) {
	h := &holder{tag: c.w.newVal("holder", "", 0)}
	c.holders = append(c.holders, h)
	v.Release()
	return h, nil
}

func (c *checkpoint) Unpack(p autograd.Value) (autograd.Value, error) {
	h := p.(*holder)
	if h.v == nil {
		c.recompute()
	}
	v := h.v
	h.v = nil
	return v, nil
}

func (c *checkpoint) recompute() {
	c.recomputes++
	rt := newTape(c.t, c.w)
	rt.hooks = &refill{c: c}
	c.fn(rt, rt.param(c.input))
	rt.close()
}

// refill hands the i-th value saved during recomputation to the i-th holder.
type refill struct {
	c *checkpoint
	i int
}

func (r *refill) Pack(v autograd.Value) (autograd.Value, error) {
	h := r.c.holders[r.i]
	r.i++
	if h.v != nil {
		h.v.Release()
	}
	h.v = v.(*val)
	return r.c.w.newVal("placeholder", "", 0), nil
}

func (r *refill) Unpack(autograd.Value) (autograd.Value, error) {
	return nil, errors.New("the recomputed graph is never run")
}

func segment(tp *tape, x *scalar) *scalar { return tp.tanh(tp.mul(tp.exp(x), x)) }

func TestToyCheckpointRecomputesInUnpack(t *testing.T) {
	_, ref := toy(t)
	rx := ref.param(0.6)
	ry := segment(ref, rx)
	require.NoError(t, ref.backward(ref.mul(ry, ry), autograd.Options{}))

	w, tp := toy(t)
	ck := &checkpoint{t: t, w: w, fn: segment}
	x := tp.param(0.6)
	y := ck.run(tp, x)
	loss := tp.mul(y, y)
	assert.Equal(t, 2, w.count("saved"), "only the loss's Mul keeps values; the segment keeps holders")
	assert.Equal(t, 4, w.count("holder"))

	require.NoError(t, tp.backward(loss, autograd.Options{RetainGraph: true}))
	assert.Equal(t, 1, ck.recomputes)
	assert.InDelta(t, rx.grad(), x.grad(), 1e-12)
	assert.Equal(t, 2, w.count("saved"), "recomputed values died as they were used")
	assert.Equal(t, 4, w.count("holder"))

	require.NoError(t, tp.backward(loss, autograd.Options{}))
	assert.Equal(t, 2, ck.recomputes, "a second backward recomputes again")
	assert.InDelta(t, 2*rx.grad(), x.grad(), 1e-12)
	assert.Zero(t, w.count("saved"))
	assert.Zero(t, w.count("holder"))
}

// getFn reads its saved value n times per run, optionally after releasing it.
type getFn struct {
	w       *world
	s       *autograd.Saved
	n       int
	release bool
}

func (f *getFn) Backward(c *autograd.Ctx, _ []autograd.Value) ([]autograd.Value, error) {
	if f.release {
		f.s.Release()
	}
	var first autograd.Value
	for i := range f.n {
		v, err := f.s.Get(c)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			first = v
		} else if v != first {
			return nil, errors.New("a second Get in one run unpacked again")
		}
	}
	return []autograd.Value{f.w.newVal("grad", "get", 1)}, nil
}

func getNode(t *testing.T, tp *tape, f *getFn, hooks autograd.SavedHooks) *autograd.Node {
	n, err := autograd.NewNode(autograd.NodeSpec{Name: "Get", Outputs: 1, Fn: f, Inputs: []autograd.Edge{tp.param(1).edge}})
	require.NoError(t, err)
	f.s, err = n.Save(tp.w.newVal("saved", "get", 1), hooks)
	require.NoError(t, err)
	return n
}

func runNode(tp *tape, n *autograd.Node, opts autograd.Options) error {
	opts.Arith = arith{}
	return autograd.Backward([]autograd.Root{{Edge: autograd.Edge{Node: n}, Grad: tp.w.newVal("grad", "seed", 1)}}, opts)
}

func TestGetUnpacksOncePerRun(t *testing.T) {
	w, tp := toy(t)
	off := &offload{w: w}
	f := &getFn{w: w, n: 3}
	n := getNode(t, tp, f, off)
	defer func() { require.NoError(t, n.Release()) }()
	require.NoError(t, runNode(tp, n, autograd.Options{RetainGraph: true}))
	require.NoError(t, runNode(tp, n, autograd.Options{RetainGraph: true}))
	assert.Equal(t, 2, off.unpacks)
	assert.Zero(t, w.count("saved"))
	assert.Same(t, n, f.s.Node())
}

func TestGetAfterReleaseIsBackwardTwice(t *testing.T) {
	for _, hooks := range []autograd.SavedHooks{nil, &offload{}} {
		w, tp := toy(t)
		if o, ok := hooks.(*offload); ok {
			o.w = w
		}
		f := &getFn{w: w, n: 1, release: true}
		n := getNode(t, tp, f, hooks)
		err := runNode(tp, n, autograd.Options{})
		require.ErrorIs(t, err, autograd.ErrBackwardTwice)
		assert.ErrorContains(t, err, "node Get#0")
		assert.True(t, f.s.Released())
		_, err = f.s.Get(nil)
		require.ErrorContains(t, err, "nil Ctx")
		require.NoError(t, n.Release())
	}
}

// failing hooks: Pack or Unpack fails (Pack still owns and releases v).
type failing struct{ pack, unpack bool }

func (f failing) Pack(v autograd.Value) (autograd.Value, error) {
	if f.pack {
		v.Release()
		return nil, errBoom
	}
	return v, nil
}

func (f failing) Unpack(p autograd.Value) (autograd.Value, error) {
	if f.unpack {
		return nil, errBoom
	}
	return nil, nil
}

func TestSavedHookErrors(t *testing.T) {
	w, tp := toy(t)
	y := tp.exp(tp.param(1))
	_, err := y.edge.Node.Save(w.newVal("saved", "x", 1), failing{pack: true})
	require.ErrorIs(t, err, errBoom)
	assert.ErrorContains(t, err, "pack hook")

	for _, h := range []failing{{unpack: true}, {}} {
		f := &getFn{w: w, n: 1}
		n := getNode(t, tp, f, h)
		err = runNode(tp, n, autograd.Options{})
		assert.ErrorContains(t, err, "unpack hook")
		require.NoError(t, n.Release())
	}
}

// versioned is a toy value whose storage counts in-place writes.
type versioned struct {
	*val
	version *uint64
}

func (v versioned) Version() uint64 { return *v.version }

func TestInPlaceModificationOfSavedValue(t *testing.T) {
	for _, offloaded := range []bool{false, true} {
		w, tp := toy(t)
		var hooks autograd.SavedHooks
		if offloaded {
			hooks = &offload{w: w}
		}
		var version uint64
		f := &getFn{w: w, n: 1}
		n, err := autograd.NewNode(autograd.NodeSpec{Name: "Get", Outputs: 1, Fn: f, Inputs: []autograd.Edge{tp.param(1).edge}})
		require.NoError(t, err)
		_, err = n.Save(w.newVal("saved", "first", 1), nil)
		require.NoError(t, err)
		f.s, err = n.Save(versioned{w.newVal("saved", "x", 1), &version}, hooks)
		require.NoError(t, err)
		version++ // an in-place op on the saved storage
		err = runNode(tp, n, autograd.Options{})
		if offloaded {
			require.NoError(t, err, "through hooks versions are not tracked")
		} else {
			require.ErrorIs(t, err, autograd.ErrModifiedInPlace)
			assert.ErrorContains(t, err, "saved value 1 of Get#0 is at version 1; expected version 0 instead")
		}
		require.NoError(t, n.Release())
	}
}

type nilPack struct{}

func (nilPack) Pack(v autograd.Value) (autograd.Value, error) { v.Release(); return nil, nil }
func (nilPack) Unpack(autograd.Value) (autograd.Value, error) { return nil, nil }

func TestPackReturningNil(t *testing.T) {
	w, tp := toy(t)
	y := tp.exp(tp.param(1))
	_, err := y.edge.Node.Save(w.newVal("saved", "x", 1), nilPack{})
	require.ErrorContains(t, err, "pack hook returned nil")
}
