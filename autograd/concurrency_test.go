package autograd_test

import (
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/autograd"
)

// Run these under -race: each checks that the engine keeps no shared state
// and that shared nodes guard their own.

func TestConcurrentBackwardsOnSeparateGraphsSharingALeaf(t *testing.T) {
	_, st := toy(t)
	s := st.param(0.5)
	const goroutines, iters = 8, 20
	worlds := make([]*world, goroutines)
	errs := make(chan error, goroutines*iters)
	want := 0.0
	var wg sync.WaitGroup
	for g := range goroutines {
		x := 0.1 * float64(g+1)
		th := math.Tanh(x * 0.5)
		want += iters * (th + 0.5*x*(1-th*th))
		worlds[g] = newWorld()
		wg.Go(func() {
			tp := newTape(t, worlds[g])
			defer tp.close()
			x := tp.param(x)
			for range iters {
				y := tp.mul(tp.tanh(tp.mul(x, s)), s)
				errs <- tp.backward(y, autograd.Options{})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, w := range worlds {
		w.requireEmpty(t)
	}
	assert.InDelta(t, want, s.grad(), 1e-9)
	assert.Equal(t, 1, s.edge.Node.Refs(), "every graph gave back its edge to the shared leaf")
}

func TestConcurrentBackwardsThroughOneRetainedGraph(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(0.3)
	y := tp.mul(tp.exp(a), a)
	const goroutines = 8
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() { errs <- tp.backward(y, autograd.Options{RetainGraph: true}) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.InDelta(t, goroutines*math.Exp(0.3)*1.3, a.grad(), 1e-9)
	assert.Equal(t, 3, w.count("saved"))
}

func TestConcurrentReleaseOfLossesSharingAPrefix(t *testing.T) {
	w, tp := toy(t)
	a := tp.param(0.7)
	e := tp.exp(a)
	h := tp.tanh(e)
	const losses = 16
	ls := make([]*scalar, losses)
	for i := range ls {
		ls[i] = tp.pow(h, float64(i))
	}
	e.release(t)
	h.release(t)
	require.Equal(t, 2+losses, w.count("saved"))
	errs := make(chan error, losses)
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Go(func() {
			l.released = true
			errs <- l.edge.Node.Release()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Zero(t, w.count("saved"))
	assert.True(t, e.edge.Node.Freed())
	assert.Equal(t, 1, a.edge.Node.Refs())
}

func TestConcurrentConsumingBackwardsOnOneGraph(t *testing.T) {
	for range 20 {
		w, tp := toy(t)
		a := tp.param(0.3)
		y := tp.tanh(tp.mul(tp.exp(a), a))
		const goroutines = 4
		errs := make(chan error, goroutines)
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() { errs <- tp.backward(y, autograd.Options{}) })
		}
		wg.Wait()
		close(errs)
		ok := 0
		for err := range errs {
			if err == nil {
				ok++
				continue
			}
			require.ErrorIs(t, err, autograd.ErrBackwardTwice)
		}
		assert.Positive(t, ok, "one backward at least got through")
		assert.Zero(t, w.count("saved"))
		assert.Zero(t, w.count("grad"))
	}
}
