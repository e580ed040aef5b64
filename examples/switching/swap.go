package main

import (
	"errors"
	"fmt"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/examples/internal/demo"
	"github.com/subletml/sublet/internal/units"
	"github.com/subletml/sublet/nn"
	"github.com/subletml/sublet/tensor"
)

// spec is one model of the interactive session: an MLP of depth Linear layers of width
// features, evaluated on batch rows.
type spec struct {
	name                string
	depth, width, batch int
}

func (s spec) String() string {
	return fmt.Sprintf("%s (%d × Linear(%d→%d), %s of parameters)", s.name, s.depth, s.width, s.width, units.Bytes(s.paramBytes()))
}

func (s spec) paramBytes() int64 { return int64(s.depth*(s.width*s.width+s.width)) * 4 }

// load makes the model's parameters on dev (an MLP has an activation between its
// Linear layers; the last Linear gives the output).
func (s spec) load(dev device.Device) nn.Module {
	sizes := make([]int, s.depth+1)
	for i := range sizes {
		sizes[i] = s.width
	}
	return nn.NewMLP(nn.Init{Device: dev, Gen: tensor.NewGenerator(1)}, nn.MLPConfig{Sizes: sizes})
}

// evaluate runs the model on a batch under NoGrad.
func (s spec) evaluate(dev device.Device, m nn.Module) {
	sc := tensor.NewScope(tensor.NoGrad(), tensor.WithGenerator(tensor.NewGenerator(2)))
	defer sc.Close()
	m.Forward(sc.Randn(dev, dtype.F32, s.batch, s.width))
}

// row is the memory after one step of a session.
type row struct {
	step string
	// allocated and reserved are the allocator's; free is the device's free memory
	// (MemInfo); retries is num_alloc_retries so far.
	allocated, reserved, free, retries int64
	// err is the step's error (out of memory), nil when it worked.
	err error
}

// session is one way of going from model A to model B.
type session int

const (
	keepA       session = iota // A is never released: B does not fit
	releaseA                   // A released; the allocator frees its cached segments when B needs room
	releaseThen                // A released, then EmptyCache (the seeds' advice)
	numSessions
)

var sessionNames = [numSessions]string{"A kept (never released)", "A released", "A released, then EmptyCache"}

// swap runs session w on a fresh simulated GPU of capacity bytes without data.
func swap(w session, a, b spec, capacity int64) ([]row, error) {
	dev, err := sim.New(sim.Options{Capacity: capacity})
	if err != nil {
		return nil, err
	}
	al, err := alloc.For(dev)
	if err != nil {
		return nil, err
	}
	var rows []row
	do := func(step string, f func()) error {
		err := tensor.Try(f)
		free, _, ierr := dev.MemInfo()
		m := demo.Read(al)
		rows = append(rows, row{step, m.Allocated, m.Reserved, free, m.Retries, err})
		if err != nil && !errors.As(err, new(*alloc.OOMError)) {
			return err
		}
		return ierr
	}
	var ma, mb nn.Module
	defer func() {
		for _, m := range []nn.Module{ma, mb} {
			if m != nil {
				m.Release()
			}
		}
	}()
	steps := []struct {
		name string
		f    func()
		in   bool
	}{
		{"load A", func() { ma = a.load(dev) }, true},
		{"evaluate A", func() { a.evaluate(dev, ma) }, true},
		{"release A", func() { ma.Release() }, w != keepA},
		{"EmptyCache", func() {
			if err := al.EmptyCache(); err != nil {
				panic(&tensor.Error{Op: "EmptyCache", Err: err})
			}
		}, w == releaseThen},
		{"load B", func() { mb = b.load(dev) }, true},
		{"evaluate B", func() { b.evaluate(dev, mb) }, true},
		{"release B", func() { mb.Release() }, true},
	}
	for _, st := range steps {
		if !st.in {
			continue
		}
		if err := do(st.name, st.f); err != nil {
			return rows, err
		}
		if rows[len(rows)-1].err != nil {
			break // what comes after needs what failed
		}
	}
	return rows, nil
}
