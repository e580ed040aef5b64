package cpu

import (
	"math"
	"sync"
	"unsafe"

	"github.com/subletml/sublet/kernels"
)

// SGDStep updates the parameters p in place from their gradient g with the
// hyper-parameters c, rounded to T. buf is the momentum buffer (len(p) floats; unused
// and may be nil when Momentum is 0); on the first step (first) it is set to the
// gradient rather than decayed, as PyTorch does.
func SGDStep[T float](c kernels.SGD, p, g, buf []T, first bool) {
	const op = "sgd"
	checkLen(op, "g", len(g), len(p))
	k := sgdConsts[T]{lr: T(c.LR), mom: T(c.Momentum), damp1: 1 - T(c.Dampening), wd: T(c.WeightDecay)}
	if k.wd != 0 {
		k.flags |= sgdWD
	}
	if k.mom != 0 {
		checkLen(op, "momentum buffer", len(buf), len(p))
		k.flags |= sgdMomentum
		if first {
			k.flags |= sgdFirst
		}
		if c.Nesterov {
			k.flags |= sgdNesterov
		}
	}
	pool := poolFor[T](&sgdConstPools)
	kp := onHeap(pool, k)
	forRange(len(p), grain, sgdPieces[T]{k: kp, v: optimVector[T](), p: p, g: g, buf: buf})
	pool.Put(kp)
}

// The vector loops read a step's constants through a pointer, so they live on the
// heap: in objects taken from these pools (by is32[T]) for the step, not allocated
// per step.
var sgdConstPools, adamConstPools [2]sync.Pool

// onHeap returns a copy of k in an object from p, which the caller puts back once the
// step is done.
func onHeap[C any](p *sync.Pool, k C) *C {
	h, _ := p.Get().(*C)
	if h == nil {
		h = new(C)
	}
	*h = k
	return h
}

// sgdPieces is SGDStep's state for forRange.
type sgdPieces[T float] struct {
	k         *sgdConsts[T]
	v         optimVec
	p, g, buf []T
}

func (s sgdPieces[T]) run(lo, hi int) {
	var b []T
	if s.k.flags&sgdMomentum != 0 {
		b = s.buf[lo:hi]
	}
	s.k.run(s.v, s.p[lo:hi], s.g[lo:hi], b)
}

// sgdConsts are SGDStep's hyper-parameters in T as its vector loops read them
// (optim_gen.go): flags at offset 0, the values from offset 8.
type sgdConsts[T float] struct {
	flags              int // sgdWD | sgdMomentum | sgdFirst | sgdNesterov
	lr, mom, damp1, wd T   // damp1 is 1 - dampening
}

const (
	sgdWD       = 1 << iota // add wd·p to the gradient
	sgdMomentum             // keep a momentum buffer
	sgdFirst                // the first step: the buffer is set to the gradient
	sgdNesterov             // Nesterov momentum
)

// run updates p from g (and buf) on vectors of v's width, then element by element
// for the rest: the same operations in the same order either way (the conversions
// keep the compiler from fusing a multiply and an add), so every element gets the
// same bits wherever it sits.
func (k *sgdConsts[T]) run(v optimVec, p, g, buf []T) {
	n := 0
	if v.width > 0 {
		n = len(p) &^ (v.width - 1)
		if n > 0 {
			v.sgd(unsafe.Pointer(&p[0]), unsafe.Pointer(&g[0]), unsafe.Pointer(unsafe.SliceData(buf)), n, unsafe.Pointer(k))
		}
	}
	for i := n; i < len(p); i++ {
		d := g[i]
		if k.flags&sgdWD != 0 {
			d += T(k.wd * p[i])
		}
		if k.flags&sgdMomentum != 0 {
			b := d
			if k.flags&sgdFirst == 0 {
				b = T(k.mom*buf[i]) + T(k.damp1*d)
			}
			buf[i] = b
			if k.flags&sgdNesterov != 0 {
				d += T(k.mom * b)
			} else {
				d = b
			}
		}
		p[i] -= T(k.lr * d)
	}
}

// AdamStep runs Adam's (AdamW's when c.Decoupled) update number step (1 for the
// first) on parameters p in place from their gradient g, with the first and second
// moment buffers m and v (len(p) floats each, zero before the first step), fused in
// one pass. The bias corrections are computed in float64, the elements in T.
func AdamStep[T float](c kernels.Adam, step int, p, g, m, v []T) {
	const op = "adam"
	checkLen(op, "g", len(g), len(p))
	checkLen(op, "m", len(m), len(p))
	checkLen(op, "v", len(v), len(p))
	if step < 1 {
		panic("kernels/cpu: adam: step numbers start at 1")
	}
	bc1 := 1 - math.Pow(c.Beta1, float64(step))
	bc2 := 1 - math.Pow(c.Beta2, float64(step))
	k := adamConsts[T]{
		b1: T(c.Beta1), omb1: T(1 - c.Beta1), b2: T(c.Beta2), omb2: T(1 - c.Beta2),
		decay: 1, stepSize: T(c.LR / bc1), rbc2: T(1 / math.Sqrt(bc2)), eps: T(c.Eps), wd: T(c.WeightDecay),
	}
	if c.Decoupled {
		k.decay = T(1 - c.LR*c.WeightDecay)
	} else if k.wd != 0 {
		k.flags |= adamWD
	}
	pool := poolFor[T](&adamConstPools)
	kp := onHeap(pool, k)
	forRange(len(p), grain, adamPieces[T]{k: kp, vec: optimVector[T](), p: p, g: g, m: m, v: v})
	pool.Put(kp)
}

// adamPieces is AdamStep's state for forRange, as sgdPieces.
type adamPieces[T float] struct {
	k          *adamConsts[T]
	vec        optimVec
	p, g, m, v []T
}

func (s adamPieces[T]) run(lo, hi int) {
	s.k.run(s.vec, s.p[lo:hi], s.g[lo:hi], s.m[lo:hi], s.v[lo:hi])
}

// adamConsts are AdamStep's hyper-parameters in T as its vector loops read them
// (optim_gen.go): flags at offset 0, the values from offset 8.
type adamConsts[T float] struct {
	flags int // adamWD
	// omb1 and omb2 are 1-β1 and 1-β2, decay multiplies p (AdamW), rbc2 is
	// 1/√(1-β2^t).
	b1, omb1, b2, omb2, decay, stepSize, rbc2, eps, wd T
}

const adamWD = 1 // add wd·p to the gradient (Adam, not AdamW)

// run is sgdConsts.run for Adam.
func (k *adamConsts[T]) run(vec optimVec, p, g, m, v []T) {
	n := 0
	if vec.width > 0 {
		n = len(p) &^ (vec.width - 1)
		if n > 0 {
			vec.adam(unsafe.Pointer(&p[0]), unsafe.Pointer(&g[0]), unsafe.Pointer(&m[0]), unsafe.Pointer(&v[0]), n, unsafe.Pointer(k))
		}
	}
	for i := n; i < len(p); i++ {
		d := g[i]
		if k.flags&adamWD != 0 {
			d += T(k.wd * p[i])
		}
		mi := T(k.b1*m[i]) + T(k.omb1*d)
		vi := T(k.b2*v[i]) + T(T(k.omb2*d)*d)
		m[i], v[i] = mi, vi
		p[i] = T(p[i]*k.decay) - T(k.stepSize*mi)/(T(sqrtf(vi)*k.rbc2)+k.eps)
	}
}

// optimVec is a pair of vector loops of the optimizers for one element type
// (optim_amd64.s): width elements a vector (0: none), n a multiple of it.
type optimVec struct {
	width int
	sgd   func(p, g, buf unsafe.Pointer, n int, k unsafe.Pointer)
	adam  func(p, g, m, v unsafe.Pointer, n int, k unsafe.Pointer)
}

// optimVector is the widest optimizer loop this CPU has for T (width 0: none).
func optimVector[T float]() optimVec {
	vs := optimVecs32
	if !is32[T]() {
		vs = optimVecs64
	}
	if len(vs) == 0 {
		return optimVec{}
	}
	return vs[0]
}
