package tensor

import (
	"slices"
	"sync"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// The multi-tensor steps below are StepSGD, StepAdam and Unscale over lists of
// tensors, as PyTorch's foreach and fused optimizers take them: every tensor gets the
// bits the single-tensor step gives it, and a GPU runs a whole list of one device in
// one launch per table (kernels.Backend's SGDMulti) instead of a launch per tensor.
// Each entry follows its single-tensor step's rules; entries on several devices run
// as one call per device, in the order the devices first appear.

// StepSGDMulti runs StepSGD(c, p[i], g[i], buf[i], first[i]) for every i; buf is nil
// when c.Momentum is 0.
func StepSGDMulti(c kernels.SGD, p, g, buf []*Tensor, first []bool) {
	const op = "StepSGDMulti"
	mom := c.Momentum != 0
	checkLists(op, p, len(g), len(first))
	if mom {
		checkLists(op, p, len(buf))
	} else if buf != nil {
		fail(op, ErrShape, p, "a momentum buffer goes with a non-zero Momentum (%g), and only then", c.Momentum)
	}
	sc := multiScratch.Get().(*operandLists)
	for _, idx := range sc.byDevice(op, p) {
		var k kernels.Backend
		ps, gs, bs, fs := sc.list(0, len(idx)), sc.list(1, len(idx)), []kernels.Operand(nil), append(sc.flags[:0], make([]bool, len(idx))...)
		if mom {
			bs = sc.list(2, len(idx))
		}
		for j, i := range idx {
			var b *Tensor
			if mom {
				if b = buf[i]; b == nil {
					fail(op, ErrShape, []*Tensor{p[i], g[i]}, "parameter %d has no momentum buffer for Momentum %g", i, c.Momentum)
				}
				bs[j] = b.operand()
			}
			k = updating(op, p[i], g[i], b)
			ps[j], gs[j], fs[j] = p[i].operand(), g[i].operand(), first[i]
		}
		k.SGDMulti(c, ps, gs, bs, fs)
		sc.flags = fs
		if mom {
			for _, i := range idx {
				buf[i].st.BumpVersion()
			}
		}
	}
	sc.recycle()
}

// StepAdamMulti runs StepAdam(c, steps[i], p[i], g[i], m[i], v[i]) for every i.
func StepAdamMulti(c kernels.Adam, steps []int, p, g, m, v []*Tensor) {
	const op = "StepAdamMulti"
	checkLists(op, p, len(steps), len(g), len(m), len(v))
	sc := multiScratch.Get().(*operandLists)
	for _, idx := range sc.byDevice(op, p) {
		var k kernels.Backend
		ps, gs, ms, vs, ss := sc.list(0, len(idx)), sc.list(1, len(idx)), sc.list(2, len(idx)), sc.list(3, len(idx)),
			append(sc.ints[:0], make([]int, len(idx))...)
		for j, i := range idx {
			if steps[i] < 1 {
				fail(op, ErrShape, []*Tensor{p[i]}, "step %d of parameter %d: steps are numbered from 1", steps[i], i)
			}
			k = updating(op, p[i], g[i], m[i], v[i])
			adamNotCaptured(op, p[i])
			ps[j], gs[j], ms[j], vs[j], ss[j] = p[i].operand(), g[i].operand(), m[i].operand(), v[i].operand(), steps[i]
		}
		k.AdamMulti(c, ss, ps, gs, ms, vs)
		sc.ints = ss
		for _, i := range idx {
			m[i].st.BumpVersion()
			v[i].st.BumpVersion()
		}
	}
	sc.recycle()
}

// StepAdamMultiCapturable runs StepAdam on every parameter with the learning rate and
// the step counts on the device (PyTorch's capturable Adam): lr is a one-element F64
// tensor holding the rate (c.LR is not read), steps an F64 vector whose element
// slot[i] counts parameter i's updates so far; parameter i takes update number
// steps[slot[i]]+1, with the bits StepAdamMulti gives it, and its count grows by one.
// Nothing is computed on the host from the rate or the counts, so a graph capture can
// record the step (StepAdamMulti refuses one): each replay reads the counts and the
// rate as they are then. The slots are distinct; every tensor is on lr's device.
func StepAdamMultiCapturable(c kernels.Adam, lr, steps *Tensor, slot []int, p, g, m, v []*Tensor) {
	const op = "StepAdamMultiCapturable"
	checkLists(op, p, len(slot), len(g), len(m), len(v))
	for _, t := range []*Tensor{lr, steps} {
		if t == nil {
			fail(op, ErrShape, nil, "the learning rate and the step counts are tensors; pass both")
		}
		t.live(op)
		switch {
		case t.node != nil:
			fail(op, ErrGrad, []*Tensor{t}, "the rate and the counts are state, not the output of %s", t.node.Name())
		case t.dt != dtype.F64 || !t.IsContiguous():
			fail(op, ErrDType, []*Tensor{lr, steps}, "the rate and the counts are contiguous F64 tensors, not %v with strides %v", t.dt, t.strides)
		case t.st.dev != lr.st.dev:
			fail(op, ErrDevice, []*Tensor{lr, steps}, "the rate is on %s, the counts on %s", lr.st.dev.Name(), steps.st.dev.Name())
		}
	}
	if lr.Numel() != 1 {
		fail(op, ErrShape, []*Tensor{lr}, "the learning rate is one element, not %v", lr.shape)
	}
	if err := kernels.CheckSlots(slot, steps.Numel()); err != nil {
		fail(op, ErrShape, []*Tensor{steps}, "%v", err)
	}
	ps, gs, ms, vs := make([]kernels.Operand, len(p)), make([]kernels.Operand, len(p)), make([]kernels.Operand, len(p)), make([]kernels.Operand, len(p))
	var k kernels.Backend
	for i := range p {
		if p[i] == nil {
			fail(op, ErrShape, nil, "parameter %d is nil", i)
		}
		k = updating(op, p[i], g[i], m[i], v[i])
		if p[i].st.dev != lr.st.dev {
			fail(op, ErrDevice, []*Tensor{p[i], lr}, "parameter %d is on %s, the rate and the counts on %s", i, p[i].st.dev.Name(), lr.st.dev.Name())
		}
		ps[i], gs[i], ms[i], vs[i] = p[i].operand(), g[i].operand(), m[i].operand(), v[i].operand()
	}
	if k == nil {
		return // no parameters
	}
	k.AdamMultiCapturable(c, lr.operand(), steps.operand(), slot, ps, gs, ms, vs)
	for i := range p {
		m[i].st.BumpVersion()
		v[i].st.BumpVersion()
	}
	steps.st.BumpVersion()
}

// UnscaleMulti runs Unscale(g[i], inv, found) for every i: found, a one-element F32
// tensor on the gradients' device, is set to 1 when any of them held an Inf or a NaN.
// Every gradient must be on found's device.
func UnscaleMulti(g []*Tensor, inv float64, found *Tensor) {
	const op = "UnscaleMulti"
	found.live(op)
	if found.dt != dtype.F32 || found.Numel() != 1 {
		fail(op, ErrDType, []*Tensor{found}, "takes a one-element F32 flag, not %v %v", found.dt, found.shape)
	}
	gs := make([]kernels.Operand, len(g))
	for i, t := range g {
		t.live(op)
		if !t.dt.IsFloat() {
			fail(op, ErrDType, []*Tensor{t, found}, "gradient %d is %v; it takes floating gradients", i, t.dt)
		}
		if t.st.dev != found.st.dev {
			fail(op, ErrDevice, []*Tensor{t, found}, "gradient %d is on %s, the flag on %s", i, t.st.dev.Name(), found.st.dev.Name())
		}
		gs[i] = t.operand()
	}
	k := kernelsFor(op, found.st.dev, append([]*Tensor{found}, g...))
	k.UnscaleMulti(gs, inv, found.operand())
	for _, t := range g {
		t.st.BumpVersion()
	}
	found.st.BumpVersion()
}

// operandLists are the lists a multi-tensor step hands its kernels (which read them
// only during the call), kept from step to step in multiScratch so that a training
// loop's optimizer step allocates none. A failed step's lists are left to the
// garbage collector.
type operandLists struct {
	ops   [4][]kernels.Operand
	ints  []int
	flags []bool
	devs  []device.Device // byDevice's
	idx   [][]int         // byDevice's
}

var multiScratch = sync.Pool{New: func() any { return new(operandLists) }}

// list returns list i with room for n operands, zero.
func (l *operandLists) list(i, n int) []kernels.Operand {
	l.ops[i] = append(l.ops[i][:0], make([]kernels.Operand, n)...)
	return l.ops[i]
}

// recycle empties l, keeping its room and no memory's address, and gives it back.
func (l *operandLists) recycle() {
	for i := range l.ops {
		clear(l.ops[i])
		l.ops[i] = l.ops[i][:0]
	}
	clear(l.devs)
	l.ints, l.flags, l.devs = l.ints[:0], l.flags[:0], l.devs[:0]
	multiScratch.Put(l)
}

// checkLists fails, naming op, unless each of lens is len(p): one entry per parameter.
func checkLists(op string, p []*Tensor, lens ...int) {
	for _, l := range lens {
		if l != len(p) {
			fail(op, ErrShape, nil, "lists of %v entries for %d parameters; pass one entry per parameter in each", slices.Clone(lens), len(p))
		}
	}
}

// byDevice returns, for op, the positions of p's tensors grouped by device, the devices in the
// order they first appear, in l's room.
func (l *operandLists) byDevice(op string, p []*Tensor) [][]int {
	devs, idx := l.devs[:0], l.idx[:0]
	defer func() { l.devs, l.idx = devs, idx }()
	for i, t := range p {
		if t == nil {
			fail(op, ErrShape, nil, "parameter %d is nil", i)
		}
		t.live(op)
		j := 0
		for j < len(devs) && devs[j] != t.st.dev {
			j++
		}
		if j == len(devs) {
			var room []int
			if j < cap(idx) {
				room = idx[:j+1][j][:0] // the room the list in this place had last time
			}
			devs, idx = append(devs, t.st.dev), append(idx, room)
		}
		idx[j] = append(idx[j], i)
	}
	return idx
}
