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

// emptyCacheEpoch is the emptycache experiment's epoch, in steps: its "every epoch"
// case empties the cache less often than the seed's "every 100 batches".
const emptyCacheEpoch = 500

// cadences are the emptycache experiment's cases, the seed tutorial's table: EmptyCache
// never, every epoch, every 100 steps and after every step.
var cadences = []struct {
	name  string
	every int64 // steps between two EmptyCache calls; 0 is never
}{
	{"never", 0},
	{fmt.Sprintf("every epoch (%d)", emptyCacheEpoch), emptyCacheEpoch},
	{"every 100", 100},
	{"every 1", 1},
}

// gflops is the floating-point work of one training step of m: 6 flops per parameter
// and sample (2 for the forward's multiply-add, 4 for the backward's two), in units of
// 1e9.
func (m mlp) gflops() float64 {
	var params int64
	for _, d := range m.dims() {
		params += d[0]*d[1] + d[1]
	}
	return 6 * float64(params) * float64(m.batch) / 1e9
}

// fp32TFLOPS is the FP32 GEMM rate measured through cuBLAS on the H200 (51.3 TFLOP/s,
// 2026-11-30): what the emptycache experiment's default compute time assumes.
const fp32TFLOPS = 51.3

// defaultCompute is the simulated compute time of one step of trainModel: its flops at
// fp32TFLOPS (2.26 ms).
func defaultCompute() time.Duration {
	return time.Duration(trainModel.gflops() / fp32TFLOPS * 1e6) // 1e9 flop / 1e12 flop/s in ns
}

// driverClock is a device whose driver calls are charged to a virtual clock instead of
// taking real time (device/sim): the experiment adds the clock's advance to the time
// it measured.
type driverClock interface {
	Elapsed() time.Duration
}

// driverTime is dev's virtual driver time so far, 0 for a device whose driver calls
// take real time (they are in the measured time already).
func driverTime(dev device.Device) time.Duration {
	if c, ok := dev.(driverClock); ok {
		return c.Elapsed()
	}
	return 0
}

// runEmptyCache times training steps with each of the cadences and reports steps per
// second and the ratio to never. A step's time is the host time measured, the driver's
// simulated time on a simulated device, and b.compute: no kernels run, so the compute
// a real step would do is added as a constant, serially (cuMemFree and EmptyCache
// synchronize the device, so their cost is not hidden behind compute).
func runEmptyCache(b *bench, dev device.Device) error {
	var base float64
	for _, c := range cadences {
		r, err := emptyCacheCase(b, dev, c.every)
		if err != nil {
			return err
		}
		if c.every == 0 {
			base = r.rate()
		}
		note := fmt.Sprintf("ratio to never %.4f; host %.1f µs/step", r.rate()/base, r.perStep(r.host))
		if _, ok := dev.(driverClock); ok {
			note += fmt.Sprintf(" + simulated driver %.1f µs/step", r.perStep(r.driver))
		}
		note += fmt.Sprintf(" + compute %.1f µs/step; %.2f device allocs/step; peak reserved %d MiB",
			r.perStep(r.compute), float64(r.deviceAllocs)/float64(r.steps), r.peakReserved>>20)
		b.report(Result{Experiment: "emptycache", Device: dev.Name(), Case: c.name, Value: r.rate(), Unit: "steps/s", N: r.steps, Note: note})
	}
	return nil
}

// cadenceRun is what one emptycache case measured, over steps steps after the first.
type cadenceRun struct {
	steps int64
	// host is the time measured; driver the simulated driver's (0 on a real device);
	// compute the simulated compute's.
	host, driver, compute time.Duration
	deviceAllocs          int64
	peakReserved          int64
}

// perStep is d per step in microseconds.
func (r cadenceRun) perStep(d time.Duration) float64 {
	return float64(d) / float64(time.Microsecond) / float64(r.steps)
}

// rate is the steps per second.
func (r cadenceRun) rate() float64 {
	return float64(r.steps) / (r.host + r.driver + r.compute).Seconds()
}

// emptyCacheCase runs whole epochs of training steps on a fresh allocator, with
// EmptyCache every every steps (0: never), until b.per has passed, after a first step
// that fills the cache.
func emptyCacheCase(b *bench, dev device.Device, every int64) (r cadenceRun, err error) {
	a, err := newAllocator(dev)
	if err != nil {
		return r, err
	}
	defer func() { err = finish(a, err) }()
	md, err := newModel(a, trainModel)
	if err != nil {
		return r, err
	}
	s := &stepper{a: a, m: trainModel, model: md}
	if err := s.step(); err != nil { // finish gives back what a failed experiment holds
		return r, err
	}
	a.ResetAccumulatedStats()
	a.ResetPeakStats()
	driver := driverTime(dev)
	var i int64
	per, epochs, err := measure(b.per, func() error {
		for range emptyCacheEpoch {
			i++
			if err := s.step(); err != nil {
				return err
			}
			if every > 0 && i%every == 0 {
				if err := a.EmptyCache(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	st := a.Stats()
	r = cadenceRun{
		steps:        epochs * emptyCacheEpoch,
		host:         per * time.Duration(epochs),
		driver:       driverTime(dev) - driver,
		deviceAllocs: st.NumDeviceAlloc,
		peakReserved: st.ReservedBytes[alloc.StatAll].Peak,
	}
	r.compute = b.compute * time.Duration(r.steps)
	return r, md.free()
}
