package main

import (
	"fmt"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
)

// mlp is the shape of the model whose training step the emptycache experiment
// allocates for: float32, batch × in → hidden (layers−1 times hidden → hidden) → classes,
// ReLU between, softmax cross entropy, Adam.
type mlp struct {
	batch, in, hidden, classes, layers int64
}

// trainModel is a 6-layer MLP of width 4096 on batches of 256: 75 M parameters (302 MB)
// and 603 MB of Adam state; a step allocates 45 blocks from 512 B to 64 MiB.
var trainModel = mlp{batch: 256, in: 1024, hidden: 4096, classes: 1000, layers: 6}

const f32 = 4

// dims returns the (fan-in, fan-out) of each layer.
func (m mlp) dims() [][2]int64 {
	d := make([][2]int64, m.layers)
	for i := range d {
		d[i] = [2]int64{m.hidden, m.hidden}
	}
	d[0][0] = m.in
	d[m.layers-1][1] = m.classes
	return d
}

// model holds the blocks that live across steps: weights, biases and Adam's two moments
// for each.
type model struct {
	a      *alloc.Allocator
	params []device.Ptr // weight, bias per layer
	sizes  []int64      // their byte sizes
	state  []device.Ptr // exp_avg and exp_avg_sq per parameter
}

func newModel(a *alloc.Allocator, m mlp) (*model, error) {
	md := &model{a: a}
	for _, d := range m.dims() {
		md.sizes = append(md.sizes, d[0]*d[1]*f32, d[1]*f32)
	}
	for _, n := range md.sizes {
		p, err := a.Alloc(n, 0)
		if err != nil {
			return nil, err
		}
		md.params = append(md.params, p)
	}
	for _, n := range md.sizes {
		for range 2 {
			p, err := a.Alloc(n, 0)
			if err != nil {
				return nil, err
			}
			md.state = append(md.state, p)
		}
	}
	return md, nil
}

func (md *model) free() error {
	for _, p := range append(md.params, md.state...) {
		if err := md.a.Free(p); err != nil {
			return err
		}
	}
	return nil
}

// stepper allocates and frees one training step's blocks in the order an eager
// framework does: the batch arrives, forward saves what backward needs, backward frees
// each saved block once used and produces the gradients, the optimizer uses a temporary
// per parameter, and zero_grad (set_to_none) frees the gradients.
type stepper struct {
	a     *alloc.Allocator
	m     mlp
	model *model
	// live is reused from step to step: the blocks of the step in flight.
	saved, grads []device.Ptr
}

func (s *stepper) alloc(n int64) (device.Ptr, error) { return s.a.Alloc(n, 0) }

// step runs one training step's allocations.
func (s *stepper) step() error {
	m, a := s.m, s.a
	act := m.batch * m.hidden * f32
	x, err := s.alloc(m.batch * m.in * f32)
	if err != nil {
		return err
	}
	labels, err := s.alloc(m.batch * 8)
	if err != nil {
		return err
	}
	// Forward: each layer saves its input for the weight gradient; hidden layers also
	// save their ReLU output for the ReLU backward.
	s.saved = append(s.saved[:0], x)
	for i := int64(0); i < m.layers-1; i++ {
		pre, err := s.alloc(act)
		if err != nil {
			return err
		}
		out, err := s.alloc(act) // relu(pre); pre dies at once (in-place would keep it)
		if err != nil {
			return err
		}
		if err := a.Free(pre); err != nil {
			return err
		}
		s.saved = append(s.saved, out)
	}
	logits, err := s.alloc(m.batch * m.classes * f32)
	if err != nil {
		return err
	}
	probs, err := s.alloc(m.batch * m.classes * f32) // softmax, saved for backward
	if err != nil {
		return err
	}
	loss, err := s.alloc(f32)
	if err != nil {
		return err
	}
	if err := freeAll(a, logits); err != nil {
		return err
	}
	// Backward.
	grad, err := s.alloc(m.batch * m.classes * f32)
	if err != nil {
		return err
	}
	if err := freeAll(a, probs, loss, labels); err != nil {
		return err
	}
	s.grads = s.grads[:0]
	dims := m.dims()
	for i := m.layers - 1; i >= 0; i-- {
		gw, err := s.alloc(dims[i][0] * dims[i][1] * f32)
		if err != nil {
			return err
		}
		gb, err := s.alloc(dims[i][1] * f32)
		if err != nil {
			return err
		}
		s.grads = append(s.grads, gw, gb)
		var gin device.Ptr
		if i > 0 {
			if gin, err = s.alloc(act); err != nil { // grad of the input, through ReLU
				return err
			}
		}
		if err := freeAll(a, grad, s.saved[i]); err != nil {
			return err
		}
		grad = gin
	}
	// Adam: one temporary per parameter (the update), then zero_grad frees the grads.
	for _, n := range s.model.sizes {
		t, err := s.alloc(n)
		if err != nil {
			return err
		}
		if err := a.Free(t); err != nil {
			return err
		}
	}
	return freeAll(a, s.grads...)
}

func freeAll(a *alloc.Allocator, ps ...device.Ptr) error {
	for _, p := range ps {
		if err := a.Free(p); err != nil {
			return err
		}
	}
	return nil
}

// runEmptyCache times training steps with EmptyCache never, every 100 steps and after
// every step, and reports steps per second and the ratio to never.
func runEmptyCache(b *bench, dev device.Device) error {
	var base float64
	for _, every := range []int64{0, 100, 1} {
		rate, err := emptyCacheCase(b, dev, every, base)
		if err != nil {
			return err
		}
		if every == 0 {
			base = rate
		}
	}
	return nil
}

// emptyCacheCase times training steps on a fresh allocator with EmptyCache every
// every steps (0: never), reports them against base steps/s, and returns its steps/s.
func emptyCacheCase(b *bench, dev device.Device, every int64, base float64) (rate float64, err error) {
	a, err := newAllocator(dev)
	if err != nil {
		return 0, err
	}
	defer func() { err = finish(a, err) }()
	md, err := newModel(a, trainModel)
	if err != nil {
		return 0, err
	}
	s := &stepper{a: a, m: trainModel, model: md}
	if err := s.step(); err != nil { // the first step fills the cache
		return 0, err
	}
	a.ResetAccumulatedStats()
	var i int64
	per, n, err := measure(b.per, func() error {
		i++
		if err := s.step(); err != nil {
			return err
		}
		if every > 0 && i%every == 0 {
			return a.EmptyCache()
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	st := a.Stats()
	rate = float64(time.Second) / float64(per)
	if every == 0 {
		base = rate
	}
	name := "never"
	if every > 0 {
		name = fmt.Sprintf("every %d", every)
	}
	b.report(Result{Experiment: "emptycache", Device: dev.Name(), Case: name, Value: rate, Unit: "steps/s", N: n,
		Note: fmt.Sprintf("ratio to never %.4f; %.2f device allocs/step; reserved %d MiB", rate/base,
			float64(st.NumDeviceAlloc)/float64(n), st.ReservedBytes[alloc.StatAll].Current>>20)})
	return rate, md.free()
}
