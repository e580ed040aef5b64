package cuda

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/subletml/sublet/device"
	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// The multi-tensor steps pass their tensors' table by value (optimList, scaleList:
// src/common.cuh's OptimList and ScaleList), as PyTorch's multi_tensor_apply does: a
// launch uploads nothing, synchronises nothing and allocates nothing, and a CUDA graph
// that captures it keeps its table. One launch takes up to hdrOptimList parameters
// (hdrScaleList gradients) of one compute type on one stream; a longer list takes a
// launch per table. A tensor on another stream than the first of its type, and for
// Unscale a strided one, goes to the single-tensor kernel.

// optimList mirrors src/common.cuh's OptimList field for field (TestStructLayouts).
type optimList struct {
	chunk          [hdrOptimList + 1]int64
	p, g, s0, s1   [hdrOptimList]uint64
	n              [hdrOptimList]int64
	stepSize, rbc2 [hdrOptimList]float64
	first          [hdrOptimList]int32
	count          int32
}

// scaleList mirrors src/common.cuh's ScaleList.
type scaleList struct {
	chunk [hdrScaleList + 1]int64
	g     [hdrScaleList]uint64
	n     [hdrScaleList]int64
	dtype [hdrScaleList]int32
	count int32
}

func (l *optimList) bytes() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(l)), unsafe.Sizeof(*l))
}

func (l *scaleList) bytes() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(l)), unsafe.Sizeof(*l))
}

// listGrid is the launch shape of a list of total chunks on stream s: a block per
// chunk, at most 32 per multiprocessor (the blocks stride over the rest), as grid
// shapes a thread per item.
func (b *Backend) listGrid(total int64, s device.Stream) cudadev.LaunchConfig {
	return b.grid(total*block, s)
}

// rounded is v as a kernel computing in float32 (f64 false) reads it: rounded once.
func rounded(f64 bool, v float64) float64 {
	if f64 {
		return v
	}
	return float64(float32(v))
}

// listStream returns the stream of the first of ps that want selects and that has
// elements (false when none does): the stream a list's launch runs on.
func listStream(ps []kernels.Operand, want func(kernels.Operand) bool) (device.Stream, bool) {
	for _, p := range ps {
		if want(p) && p.Size() > 0 {
			return p.Mem.Stream, true
		}
	}
	return 0, false
}

func (b *Backend) SGDMulti(c kernels.SGD, p, g, buf []kernels.Operand, first []bool) {
	const op = "sgd_multi"
	kernels.CheckLists("kernels/cuda: "+op, "g, first", len(p), len(g), len(first))
	mom := c.Momentum != 0
	if mom {
		kernels.CheckLists("kernels/cuda: "+op, "buf", len(p), len(buf))
	}
	for i := range p { // every operand checked before anything launches
		ft, n := rowType(p[i]), p[i].Size()
		rowsOf(op, "p", p[i], ft, n)
		rowsOf(op, "g", g[i], ft, n)
		if mom {
			if buf[i].Absent() {
				panic(fmt.Sprintf("kernels/cuda: %s: momentum %v without a momentum buffer for parameter %d", op, c.Momentum, i))
			}
			rowsOf(op, "momentum buffer", buf[i], ft, n)
		}
	}
	bufOf := func(i int) kernels.Operand {
		if mom {
			return buf[i]
		}
		return kernels.Operand{}
	}
	var l optimList
	stepLists(&l, p, func(k, i int, _ bool) {
		l.g[k], l.s0[k], l.s1[k], l.first[k] = addr(g[i]), addr(bufOf(i)), 0, boolInt(first[i])
	}, func(i int) {
		b.SGD(c, p[i], g[i], bufOf(i), first[i])
	}, func(f64 bool, s device.Stream) {
		b.launch(kSGDMulti.in(f64), b.listGrid(l.chunk[l.count], s), cudadev.ArgBytes(l.bytes()),
			number(f64, c.LR), number(f64, c.Momentum), number(f64, c.Dampening), number(f64, c.WeightDecay),
			cudadev.ArgInt32(boolInt(c.Nesterov)))
	})
}

// stepLists puts the parameters p that have elements into tables l, F32 ones then F64
// ones, and launches each table once full or at the end of its type: it writes entry
// k's p, n and chunks and has entry write the rest for parameter i, then launch
// launches l's table of f64's type on stream s. A parameter on another stream than
// the first of its type goes to single.
func stepLists(l *optimList, p []kernels.Operand, entry func(k, i int, f64 bool), single func(i int), launch func(f64 bool, s device.Stream)) {
	for _, f64 := range [2]bool{false, true} {
		of := func(o kernels.Operand) bool { return (rowType(o) == dtype.F64) == f64 }
		s, ok := listStream(p, of)
		if !ok {
			continue
		}
		l.count = 0
		for i := range p {
			n := p[i].Size()
			if !of(p[i]) || n == 0 {
				continue
			}
			if p[i].Mem.Stream != s {
				single(i)
				continue
			}
			k := l.count
			l.p[k], l.n[k] = addr(p[i]), int64(n)
			entry(int(k), i, f64)
			addChunks(l.chunk[:], &l.count, n)
			if l.count == hdrOptimList {
				launch(f64, s)
				l.count = 0
			}
		}
		if l.count > 0 {
			launch(f64, s)
		}
	}
}

// addChunks counts the entry just written at *count, of n elements, in a table's
// chunk starts.
func addChunks(chunk []int64, count *int32, n int) {
	k := *count
	if k == 0 {
		chunk[0] = 0
	}
	chunk[k+1] = chunk[k] + (int64(n)+hdrListChunk-1)/hdrListChunk
	*count = k + 1
}

// checkAdamOperands panics, naming op, unless parameter i's p, g, m and v are
// contiguous, of one size and of p's compute type.
func checkAdamOperands(op string, i int, p, g, m, v []kernels.Operand) {
	ft, n := rowType(p[i]), p[i].Size()
	rowsOf(op, "p", p[i], ft, n)
	rowsOf(op, "g", g[i], ft, n)
	rowsOf(op, "m", m[i], ft, n)
	rowsOf(op, "v", v[i], ft, n)
}

// AdamMulti computes each parameter's bias corrections on the host in float64, as Adam
// does, and passes them in the table rounded to the compute type.
func (b *Backend) AdamMulti(c kernels.Adam, steps []int, p, g, m, v []kernels.Operand) {
	const op = "adam_multi"
	kernels.CheckLists("kernels/cuda: "+op, "steps, g, m, v", len(p), len(steps), len(g), len(m), len(v))
	for i := range p {
		if steps[i] < 1 {
			panic(fmt.Sprintf("kernels/cuda: %s: step number %d of parameter %d: step numbers start at 1", op, steps[i], i))
		}
		checkAdamOperands(op, i, p, g, m, v)
	}
	decay := 1.0
	if c.Decoupled {
		decay = 1 - c.LR*c.WeightDecay
	}
	var l optimList
	stepLists(&l, p, func(k, i int, f64 bool) {
		l.g[k], l.s0[k], l.s1[k], l.first[k] = addr(g[i]), addr(m[i]), addr(v[i]), 0
		bc1 := 1 - math.Pow(c.Beta1, float64(steps[i]))
		bc2 := 1 - math.Pow(c.Beta2, float64(steps[i]))
		l.stepSize[k], l.rbc2[k] = rounded(f64, c.LR/bc1), rounded(f64, 1/math.Sqrt(bc2))
	}, func(i int) {
		b.Adam(c, steps[i], p[i], g[i], m[i], v[i])
	}, func(f64 bool, s device.Stream) {
		args := [9]cudadev.Arg{
			cudadev.ArgBytes(l.bytes()),
			number(f64, c.Beta1), number(f64, c.Beta2), number(f64, 1-c.Beta1), number(f64, 1-c.Beta2),
			number(f64, c.Eps), number(f64, c.WeightDecay), number(f64, decay), cudadev.ArgInt32(boolInt(c.Decoupled)),
		}
		b.launch(kAdamMulti.in(f64), b.listGrid(l.chunk[l.count], s), args[:]...)
	})
}

// AdamMultiCapturable fills the tables as AdamMulti does, with each entry's slot in
// the step counts where SGD's tables hold the first-step flag, and launches
// adam_multi_capturable, which computes the bias corrections on the device from the
// counts and the rate, then adam_count, which adds the step to the table's counts. A
// parameter on another stream gets a table of its own on its stream.
func (b *Backend) AdamMultiCapturable(c kernels.Adam, lr, steps kernels.Operand, slot []int, p, g, m, v []kernels.Operand) {
	const op = "adam_multi_capturable"
	kernels.CheckLists("kernels/cuda: "+op, "slot, g, m, v", len(p), len(slot), len(g), len(m), len(v))
	plr := rowsOf(op, "the learning rate", lr, dtype.F64, 1)
	pst := rowOperand(op, steps, dtype.F64)
	if err := kernels.CheckSlots(slot, steps.Size()); err != nil {
		panic("kernels/cuda: " + op + ": " + err.Error())
	}
	for i := range p {
		checkAdamOperands(op, i, p, g, m, v)
	}
	launch := func(l *optimList, f64 bool, s device.Stream) {
		args := [13]cudadev.Arg{
			cudadev.ArgBytes(l.bytes()), cudadev.ArgUint64(plr), cudadev.ArgUint64(pst),
			number(f64, c.Beta1), number(f64, c.Beta2), number(f64, 1-c.Beta1), number(f64, 1-c.Beta2),
			number(f64, c.Eps), number(f64, c.WeightDecay),
			cudadev.ArgFloat64(c.Beta1), cudadev.ArgFloat64(c.Beta2), cudadev.ArgFloat64(c.WeightDecay), cudadev.ArgInt32(boolInt(c.Decoupled)),
		}
		b.launch(kAdamMultiCapturable.in(f64), b.listGrid(l.chunk[l.count], s), args[:]...)
		b.launch(kAdamCount, b.grid(int64(l.count), s), cudadev.ArgBytes(l.bytes()), cudadev.ArgUint64(pst))
	}
	entry := func(l *optimList, k, i int) {
		l.g[k], l.s0[k], l.s1[k], l.first[k] = addr(g[i]), addr(m[i]), addr(v[i]), int32(slot[i])
	}
	var l optimList
	stepLists(&l, p, func(k, i int, _ bool) { entry(&l, k, i) }, func(i int) {
		var one optimList
		one.p[0], one.n[0] = addr(p[i]), int64(p[i].Size())
		entry(&one, 0, i)
		addChunks(one.chunk[:], &one.count, p[i].Size())
		launch(&one, rowType(p[i]) == dtype.F64, p[i].Mem.Stream)
	}, func(f64 bool, s device.Stream) { launch(&l, f64, s) })
	// Parameters without elements are in no table, and step all the same.
	var empty optimList
	count := func() {
		if empty.count > 0 {
			b.launch(kAdamCount, b.grid(int64(empty.count), steps.Mem.Stream), cudadev.ArgBytes(empty.bytes()), cudadev.ArgUint64(pst))
		}
		empty.count = 0
	}
	for i := range p {
		if p[i].Size() == 0 {
			empty.first[empty.count] = int32(slot[i])
			if empty.count++; empty.count == hdrOptimList {
				count()
			}
		}
	}
	count()
}

// UnscaleMulti takes contiguous gradients of every float type in one table (each
// computed in its type's precision, as Unscale computes it), strided ones one by one.
func (b *Backend) UnscaleMulti(g []kernels.Operand, inv float64, found kernels.Operand) {
	const op = "unscale_multi"
	f := rowOperand(op, found, f32)
	if found.Size() != 1 {
		panic(fmt.Sprintf("kernels/cuda: %s: the found flag has %d elements, want 1", op, found.Size()))
	}
	for _, x := range g {
		requireFloat(op, x)
	}
	listed := func(o kernels.Operand) bool { return o.IsContiguous() }
	s, ok := listStream(g, listed)
	var l scaleList
	flush := func() {
		if l.count > 0 {
			b.launch(kUnscaleMulti, b.listGrid(l.chunk[l.count], s), cudadev.ArgBytes(l.bytes()),
				cudadev.ArgFloat32(float32(inv)), cudadev.ArgFloat64(inv), cudadev.ArgUint64(f))
		}
		l.count = 0
	}
	for _, x := range g {
		n := x.Size()
		if n == 0 {
			continue
		}
		if !ok || !listed(x) || x.Mem.Stream != s {
			b.Unscale(x, inv, found)
			continue
		}
		k := l.count
		l.g[k], l.n[k], l.dtype[k] = addr(x), int64(n), int32(x.DType)
		addChunks(l.chunk[:], &l.count, n)
		if l.count == hdrScaleList {
			flush()
		}
	}
	flush()
}
