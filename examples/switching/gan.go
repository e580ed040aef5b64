package main

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

// gan is a generator and a discriminator, each with its Adam optimizer, on one device.
type gan struct {
	dev        device.Device
	a          *alloc.Allocator
	g, d       nn.Module
	optG, optD optim.Optimizer
	gen        *tensor.Generator
	ring       *rand.Rand // draws the real points
	batch      int
	zdim       int
	hasData    bool
	// backward is the bytes requested right after the last step's backward: the
	// parameters, the optimizer state and the gradients.
	backward int64
}

func newGAN(c config, dev device.Device, a *alloc.Allocator, hasData bool) (*gan, error) {
	gen := tensor.NewGenerator(c.seed)
	init := nn.Init{Device: dev, Gen: gen}
	m := &gan{dev: dev, a: a, gen: gen, ring: rand.New(rand.NewPCG(c.seed, 0x9a9)), batch: c.batch, zdim: c.zdim, hasData: hasData,
		g: nn.NewMLP(init, nn.MLPConfig{Sizes: []int{c.zdim, c.hidden, c.hidden, 2}}),
		d: nn.NewMLP(init, nn.MLPConfig{Sizes: []int{2, c.hidden, c.hidden, 2}})}
	ac := optim.DefaultAdam()
	ac.LR, ac.Beta1 = c.lr, 0.5 // the DCGAN paper's betas
	var err error
	if m.optG, err = optim.NewAdam(nn.Parameters(m.g), ac); err == nil {
		m.optD, err = optim.NewAdam(nn.Parameters(m.d), ac)
	}
	if err != nil {
		m.release()
		return nil, err
	}
	return m, nil
}

func (m *gan) release() {
	for _, o := range []optim.Optimizer{m.optG, m.optD} {
		if o != nil {
			o.Release()
		}
	}
	m.g.Release()
	m.d.Release()
}

// realBatch draws points of a ring of eight Gaussians (radius 2, sd 0.05): the data the
// generator learns to imitate.
func (m *gan) realBatch() []float32 {
	x := make([]float32, 2*m.batch)
	for i := range m.batch {
		k := float64(m.ring.IntN(8)) * math.Pi / 4
		x[2*i] = float32(2*math.Cos(k) + 0.05*m.ring.NormFloat64())
		x[2*i+1] = float32(2*math.Sin(k) + 0.05*m.ring.NormFloat64())
	}
	return x
}

// labels is a batch of one class: 1 for real, 0 for fake.
func (m *gan) labels(s *tensor.Scope, class int64) *tensor.Tensor {
	l := make([]int64, m.batch)
	for i := range l {
		l[i] = class
	}
	return tensor.FromSlice(s, m.dev, dtype.I64, l)
}

// fakes draws noise and runs the generator on it in s.
func (m *gan) fakes(s *tensor.Scope) *tensor.Tensor {
	return m.g.Forward(s.Randn(m.dev, dtype.F32, m.batch, m.zdim))
}

// stepD trains the discriminator on a real batch and a fake one, the fakes made under
// NoGrad: the generator's graph is not needed. It returns the loss (0 without data).
func (m *gan) stepD() float64 {
	s := tensor.NewScope(tensor.WithGenerator(m.gen))
	ng := s.Child(tensor.NoGrad())
	fake := ng.Keep(m.fakes(ng))
	ng.Close()
	real := tensor.FromSlice(s, m.dev, dtype.F32, m.realBatch(), m.batch, 2)
	ce := nn.CrossEntropyLoss{}
	loss := ce.Loss(m.d.Forward(real), m.labels(s, 1)).Add(ce.Loss(m.d.Forward(fake), m.labels(s, 0)))
	v := m.backwardOf(loss)
	s.Close()
	m.optD.Step()
	m.optD.ZeroGrad(true)
	return v
}

// stepG trains the generator to make the discriminator call its fakes real. The
// backward goes through the discriminator; unless it is frozen (its parameters do not
// require gradients for the step) it computes the discriminator's gradients too, which
// are then dropped.
func (m *gan) stepG(freezeD bool) float64 {
	if freezeD {
		for _, p := range nn.Parameters(m.d) {
			p.SetRequiresGrad(false)
		}
		defer func() {
			for _, p := range nn.Parameters(m.d) {
				p.SetRequiresGrad(true)
			}
		}()
	}
	s := tensor.NewScope(tensor.WithGenerator(m.gen))
	loss := nn.CrossEntropyLoss{}.Loss(m.d.Forward(m.fakes(s)), m.labels(s, 1))
	v := m.backwardOf(loss)
	s.Close()
	m.optG.Step()
	m.optG.ZeroGrad(true)
	m.optD.ZeroGrad(true)
	return v
}

// backwardOf runs the loss's backward, records the memory then, and returns the loss
// (0 without data).
func (m *gan) backwardOf(loss *tensor.Tensor) float64 {
	loss.Backward()
	m.backward = demo.Read(m.a).Tensors()
	if !m.hasData {
		return 0
	}
	return loss.Item()
}

// moment is the memory of one step, in bytes requested: held before it, right after
// its backward, at its peak, and after it.
type moment struct {
	before, backward, peak, after int64
}

// ganResult is what part 1 measured.
type ganResult struct {
	paramsG, paramsD, stateG, stateD int64
	// d, g and gFrozen are the last steps of each kind.
	d, g, gFrozen moment
	// lossD and lossG are the losses every report steps (with data).
	lossD, lossG []float64
	// plain and emptied are the same training without and with EmptyCache before every
	// cadence-th generator step (the seeds' advice).
	plain, emptied cadence
}

// cadence is what one training run cost the device.
type cadence struct {
	deviceAllocs, deviceFrees int64
	driver, elapsed           time.Duration
}

// trainGAN alternates discriminator and generator steps and measures them.
func trainGAN(c config, dev device.Device, a *alloc.Allocator, hasData bool) (ganResult, error) {
	var r ganResult
	m, err := newGAN(c, dev, a, hasData)
	if err != nil {
		return r, err
	}
	defer m.release()
	measure := func(step func() float64) (moment, float64) {
		a.ResetPeakStats()
		mo := moment{before: demo.Read(a).Tensors()}
		v := step()
		now := demo.Read(a)
		mo.peak, mo.after = now.PeakTensors(), now.Tensors()
		mo.backward = m.backward
		return mo, v
	}
	run := func(steps, every int) cadence {
		if err == nil {
			err = a.EmptyCache() // both runs start from an empty cache
		}
		start, driver, began := demo.Read(a), demo.DriverTime(dev), time.Now()
		for i := 1; i <= steps; i++ {
			var ld, lg float64
			r.d, ld = measure(m.stepD)
			if every > 0 && i%every == 0 && err == nil {
				err = a.EmptyCache()
			}
			r.g, lg = measure(func() float64 { return m.stepG(false) })
			if every == 0 && (i%c.report == 0 || i == steps) {
				r.lossD, r.lossG = append(r.lossD, ld), append(r.lossG, lg)
			}
		}
		end := demo.Read(a)
		return cadence{end.DeviceAllocs - start.DeviceAllocs, end.DeviceFrees - start.DeviceFrees, demo.DriverTime(dev) - driver, time.Since(began)}
	}
	r.plain = run(c.steps, 0)
	r.emptied = run(c.steps, c.every)
	if err != nil {
		return r, err
	}
	r.gFrozen, _ = measure(func() float64 { return m.stepG(true) })
	r.paramsG, r.paramsD = nn.ParameterBytes(m.g), nn.ParameterBytes(m.d)
	r.stateG, r.stateD = m.optG.StateBytes(), m.optD.StateBytes()
	return r, nil
}
