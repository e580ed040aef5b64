package main

import (
	"fmt"

	"github.com/subletml/sublet/alloc"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/sim"
)

// pairSizes are torch_alloc_cpp.py's pair sizes.
var pairSizes = []int64{512, 1 << 20, 20 << 20, 256 << 20}

// runPair times Alloc+Free of one size after a first pair has made the segment: the
// cached fast path, never reaching the device.
func runPair(b *bench, dev device.Device) (err error) {
	a, err := newAllocator(dev)
	if err != nil {
		return err
	}
	defer func() { err = finish(a, err) }()
	for _, size := range pairSizes {
		ns, n, err := measure(b.per, pairStep(a, size))
		if err != nil {
			return err
		}
		b.report(Result{Experiment: "pair", Device: dev.Name(), Case: sizeName(size), Value: float64(ns.Nanoseconds()), Unit: "ns/pair", N: n})
	}
	return nil
}

// pairStep returns one Alloc+Free of size on stream 0.
func pairStep(a *alloc.Allocator, size int64) func() error {
	return func() error {
		p, err := a.Alloc(size, 0)
		if err != nil {
			return err
		}
		return a.Free(p)
	}
}

// churn is torch_alloc_cpp.py's churn: an LCG picks one of 64 slots; a live slot is
// freed, an empty one gets 512 B × (1 + a number below 8192), up to 4 MiB.
type churn struct {
	a      *alloc.Allocator
	stream device.Stream
	x      uint64
	slot   [64]device.Ptr
	// touch, when not nil, is called on every new block (a device call per
	// allocation, for the concurrent experiment).
	touch func(p device.Ptr, size int64) error
}

func (c *churn) step() error {
	c.x = c.x*6364136223846793005 + 1442695040888963407
	s := (c.x >> 33) % 64
	if p := c.slot[s]; p != 0 {
		c.slot[s] = 0
		return c.a.Free(p)
	}
	size := int64(512 * (1 + (c.x>>17)%8192))
	p, err := c.a.Alloc(size, c.stream)
	if err != nil {
		return err
	}
	c.slot[s] = p
	if c.touch != nil {
		return c.touch(p, size)
	}
	return nil
}

// drain frees the live slots.
func (c *churn) drain() error {
	for i, p := range c.slot {
		if p != 0 {
			if err := c.a.Free(p); err != nil {
				return err
			}
			c.slot[i] = 0
		}
	}
	return nil
}

// runChurn times churn steps after torch_alloc_cpp.py's 100 000 warm-up steps.
func runChurn(b *bench, dev device.Device) (err error) {
	a, err := newAllocator(dev)
	if err != nil {
		return err
	}
	defer func() { err = finish(a, err) }()
	c := &churn{a: a, x: 42}
	for range 100_000 {
		if err := c.step(); err != nil {
			return err
		}
	}
	ns, n, err := measure(b.per, c.step)
	if err != nil {
		return err
	}
	b.report(Result{Experiment: "churn", Device: dev.Name(), Case: "64 slots 512B-4MiB", Value: float64(ns.Nanoseconds()), Unit: "ns/step", N: n})
	return c.drain()
}

// rawSizes are the sizes raw compares: the pair sizes and 1 GiB.
var rawSizes = append(pairSizes[:len(pairSizes):len(pairSizes)], 1<<30)

// runRaw times the device's own Malloc+Free (cuMemAlloc+cuMemFree on a GPU) against the
// allocator's cached Alloc+Free of the same sizes. On the simulated device the raw path
// costs nothing real (its cost model charges a virtual clock), so it is skipped there.
func runRaw(b *bench, dev device.Device) (err error) {
	if _, ok := dev.(*sim.Device); ok {
		return nil
	}
	a, err := newAllocator(dev)
	if err != nil {
		return err
	}
	defer func() { err = finish(a, err) }()
	for _, size := range rawSizes {
		raw, n, err := measure(b.per, func() error {
			p, err := dev.Malloc(size)
			if err != nil {
				return err
			}
			return dev.Free(p)
		})
		if err != nil {
			return err
		}
		b.report(Result{Experiment: "raw", Device: dev.Name(), Case: sizeName(size) + " device Malloc+Free", Value: float64(raw.Nanoseconds()), Unit: "ns/pair", N: n})
		cached, n, err := measure(b.per, pairStep(a, size))
		if err != nil {
			return err
		}
		b.report(Result{Experiment: "raw", Device: dev.Name(), Case: sizeName(size) + " cached Alloc+Free", Value: float64(cached.Nanoseconds()), Unit: "ns/pair", N: n,
			Note: fmt.Sprintf("raw/cached = %.0f", float64(raw)/float64(max(cached, 1)))})
		if err := a.EmptyCache(); err != nil { // the next size starts from the device again
			return err
		}
	}
	return nil
}
