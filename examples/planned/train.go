package main

import (
	"fmt"
	"hash/fnv"
	"time"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/device/named"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/optim"
	"github.com/subletml/sublet/tensor"
)

// result is what one training run measured.
type result struct {
	model  string
	policy alloc.Policy
	steps  int
	scale  int
	// flatFrom is the first step from which, after every step to the last, reserved
	// memory and the device's allocation and free counts stayed as they were: the plan
	// serves the steps, no driver call is made. -1 when the last step changed them.
	flatFrom int
	// reserved is reserved memory after the last step; peakReserved and peakAllocated
	// the peaks of the run.
	reserved, peakReserved, peakAllocated int64
	// deviceAllocs counts the device's allocations (num_device_alloc) of the run.
	deviceAllocs int64
	// allocs counts the run's allocations, served those the plans served.
	allocs, served int64
	perStep        time.Duration
	// params hashes the final parameters' bytes (FNV-1a); hasData is false on the
	// meta device, where nothing is computed.
	params   uint64
	hasData  bool
	lastLoss float64
	// leftover is what stayed allocated once the model, the optimizer and the data were
	// released: 0.
	leftover int64
}

// openDevice returns a new device for a -device name (cpu, sim or sim-backed), so that
// each run has an allocator of its own, with the policy it is given.
func openDevice(name string) (device.Device, error) {
	n, err := named.Parse(name)
	if err != nil {
		return nil, fmt.Errorf("-device: %w", err)
	}
	switch n.Kind {
	case device.CPU:
		return cpu.New(cpu.Options{})
	case device.Sim:
		return sim.New(sim.Options{Backing: n.Backed})
	}
	return nil, fmt.Errorf("-device %s: this example makes a device per run, each with its own allocator: use cpu, sim or sim-backed", name)
}

// train trains a new model named modelName of the given scale with Adam for steps steps
// (at least 2), one scope per step, under policy on a new device.
func train(devName, modelName string, scale int, policy alloc.Policy, steps int) (res result, err error) {
	dev, err := openDevice(devName)
	if err != nil {
		return res, err
	}
	a, err := alloc.ForConfig(dev, alloc.Config{Policy: policy})
	if err != nil {
		return res, err
	}
	res = result{model: modelName, policy: policy, steps: steps, scale: scale, hasData: dev.Residency() != device.Meta}
	if err := tensor.Try(func() { res.run(dev, a) }); err != nil {
		return res, err
	}
	st, ps := a.Stats(), a.PlanStats()
	res.peakReserved, res.peakAllocated = st.ReservedBytes[alloc.StatAll].Peak, st.AllocatedBytes[alloc.StatAll].Peak
	res.deviceAllocs = st.NumDeviceAlloc
	res.allocs, res.served = st.Allocation[alloc.StatAll].Allocated, ps.Served
	res.leftover = st.AllocatedBytes[alloc.StatAll].Current
	return res, a.EmptyCache()
}

// run is train's loop; the model, the optimizer and each step's tensors are released
// when it returns.
func (res *result) run(dev device.Device, a *alloc.Allocator) {
	m := newModel(res.model, dev, res.scale)
	defer m.Release()
	cfg := optim.DefaultAdam()
	cfg.LR = 0.01
	opt, err := optim.NewAdam(nn.Parameters(m), cfg)
	if err != nil {
		panic(err)
	}
	defer opt.Release()
	type after struct{ reserved, allocs, frees int64 }
	trace := make([]after, res.steps)
	start := time.Now()
	for i := range res.steps {
		s := tensor.NewScope()
		loss := m.loss(s, dev, i)
		loss.Backward()
		opt.Step()
		opt.ZeroGrad(true)
		if res.hasData && i == res.steps-1 {
			res.lastLoss = loss.Item()
		}
		s.Close()
		st := a.Stats()
		trace[i] = after{st.ReservedBytes[alloc.StatAll].Current, st.NumDeviceAlloc, st.NumDeviceFree}
	}
	res.perStep = time.Since(start) / time.Duration(res.steps)
	last := trace[res.steps-1]
	res.reserved = last.reserved
	res.flatFrom = res.steps - 1
	for res.flatFrom > 0 && trace[res.flatFrom-1] == last {
		res.flatFrom--
	}
	if trace[res.steps-2] != last {
		res.flatFrom = -1
	}
	if res.hasData {
		res.params = hashParams(m)
	}
}

// hashParams hashes the bytes of m's parameters.
func hashParams(m model) uint64 {
	h := fnv.New64a()
	for _, p := range nn.Parameters(m) {
		b := make([]byte, p.Bytes())
		if p.CopyToHost(b) {
			if err := tensor.Synchronize(p.Device()); err != nil {
				panic(err)
			}
		}
		h.Write(b)
	}
	return h.Sum64()
}
