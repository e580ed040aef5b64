package tensor

import (
	"math"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// numel is the number of elements of shape (1 for a scalar).
func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// bytesOf is the size of a dense tensor of dt and shape; ok is false past 2^63 bytes
// (the product would wrap, and a huge shape would get a small storage).
func bytesOf(dt dtype.DType, shape []int) (n int64, ok bool) {
	if slices.Contains(shape, 0) {
		return 0, true
	}
	n = int64(dt.Size())
	for _, d := range shape {
		if n > math.MaxInt64/int64(d) {
			return 0, false
		}
		n *= int64(d)
	}
	return n, true
}

// rowMajor returns the contiguous strides of shape, shared and never to be written
// (layoutOf).
func rowMajor(shape []int) []int { return layoutOf(shape).strides }

// smallRank is the rank up to which an op builds a shape or strides on its stack
// before sharedOf gives the shared copy.
const smallRank = 8

// sharedLayout is a shape and strides shared by every handle that takes them: never
// written, and clipped, so that an append copies.
type sharedLayout struct{ shape, strides []int }

// layoutBits sizes the table sharedOf keeps, 1<<layoutBits slots: more than the
// distinct layouts of a model's step.
const layoutBits = 10

// layouts is sharedOf's table: layouts[i] is the last layout made whose hash picks
// slot i, nil before the first. A layout is never changed once stored, so readers
// need no lock; a slot another layout took over is replaced, not chained.
var layouts [1 << layoutBits]atomic.Pointer[sharedLayout]

// layoutOf is sharedOf shape and its row-major strides. shape is only read.
func layoutOf(shape []int) *sharedLayout {
	var room [smallRank]int
	strides := append(room[:0], shape...)
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		strides[i] = s
		s *= shape[i]
	}
	return sharedOf(shape, strides)
}

// sharedOf returns shape and strides (of one length) as slices that stay unchanged:
// the table's when the pair was seen before (a training loop makes the same layouts
// every step, and its ops then allocate no shape or strides), else new ones, stored in
// the table. shape and strides are only read.
func sharedOf(shape, strides []int) *sharedLayout {
	h := wordHash(strides, wordHash(shape, uint64(len(shape))))
	slot := &layouts[(h*0x9e3779b97f4a7c15)>>(64-layoutBits)]
	if p := slot.Load(); p != nil && slices.Equal(p.shape, shape) && slices.Equal(p.strides, strides) {
		return p
	}
	n := len(shape)
	both := make([]int, 2*n)
	p := &sharedLayout{shape: both[:n:n], strides: both[n:]}
	copy(p.shape, shape)
	copy(p.strides, strides)
	if n == 0 {
		p.shape = nil // a scalar's shape is nil, as the ops made it before the table
	}
	slot.Store(p)
	return p
}

// wordHash continues the hash h over ws (FNV-1a over words). A table picks a slot by
// the top bits of h·0x9e3779b97f4a7c15 (a Fibonacci hash), which depend on all of h's.
func wordHash[W ~int | ~uintptr](ws []W, h uint64) uint64 {
	for _, w := range ws {
		h = (h ^ uint64(w)) * 0x100000001b3
	}
	return h
}

// contiguous reports whether shape and strides place the elements row-major and dense.
func contiguous(shape, strides []int) bool {
	want := 1
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] == 1 {
			continue
		}
		if strides[i] != want {
			return false
		}
		want *= shape[i]
	}
	return true
}

// broadcastsTo reports whether shape from broadcasts to shape to without growing it.
func broadcastsTo(from, to []int) bool {
	if len(from) > len(to) {
		return false
	}
	lead := len(to) - len(from)
	for i, d := range from {
		if d != 1 && d != to[lead+i] {
			return false
		}
	}
	return true
}

// broadcast returns the numpy broadcast of shapes a and b: a or b itself when it is the
// result (shapes are never changed once made, so they are shared; clipped, so that an
// append copies).
func broadcast(a, b []int) ([]int, bool) {
	switch {
	case broadcastsTo(b, a):
		return slices.Clip(a), true
	case broadcastsTo(a, b):
		return slices.Clip(b), true
	}
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := range n {
		da, db := 1, 1
		if j := i - (n - len(a)); j >= 0 {
			da = a[j]
		}
		if j := i - (n - len(b)); j >= 0 {
			db = b[j]
		}
		switch {
		case da == db, db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, false
		}
	}
	return out, true
}

// axis resolves a possibly negative axis against rank; ok is false when out of range.
func axis(a, rank int) (int, bool) {
	if a < 0 {
		a += rank
	}
	return a, a >= 0 && a < rank
}

func sameShape(a, b []int) bool { return slices.Equal(a, b) }

// layout is t's placement in its storage.
func (t *Tensor) layout() kernels.Layout {
	return kernels.Layout{Shape: t.shape, Strides: t.strides, Offset: t.offset}
}

// placedAs is the operand of the contiguous t seen with shape, the same elements in the
// same order (a reduction's result with its reduced axes kept as 1). shape is only
// read (the operand takes layoutOf's copy).
func (t *Tensor) placedAs(shape []int) kernels.Operand {
	l := layoutOf(shape)
	o := t.operand()
	o.Layout = kernels.Layout{Shape: l.shape, Strides: l.strides, Offset: t.offset}
	return o
}

// hostF32 is c's backend as a kernels.DenseF32 and the elements of out, the op's fresh
// float32 result, and of its inputs ins (at most two) where the backend is one and
// every tensor holds float32 in host memory, densely, in out's shape: then an
// elementwise op hands the backend slices instead of operands to build and check. An
// input made by an op shares out's interned shape and strides, which settles its
// layout at once.
func (c *call) hostF32(out *Tensor, ins ...*Tensor) (d kernels.DenseF32, s [3][]float32, ok bool) {
	if d, ok = c.k.(kernels.DenseF32); !ok || out.dt != dtype.F32 || out.st.base == nil {
		return nil, s, false
	}
	n := int(out.st.size / 4)
	s[0] = unsafe.Slice((*float32)(out.st.base), n)
	for i, t := range ins {
		if t.dt != dtype.F32 || t.st.base == nil || !sameSlice(t.shape, out.shape) && !slices.Equal(t.shape, out.shape) ||
			!sameSlice(t.strides, out.strides) && !contiguous(t.shape, t.strides) || int64(t.offset+n) > t.st.size/4 {
			return nil, s, false
		}
		s[i+1] = unsafe.Slice((*float32)(t.st.base), t.st.size/4)[t.offset : t.offset+n]
	}
	return d, s, true
}

// sameSlice reports whether a and b are one slice (layoutOf's interned shapes and
// strides are shared).
func sameSlice(a, b []int) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// operand is t as a kernel operand (nil: the absent operand).
func (t *Tensor) operand() kernels.Operand {
	if t == nil {
		return kernels.Operand{}
	}
	return kernels.Operand{Layout: t.layout(), DType: t.dt, Mem: t.st.mem()}
}
