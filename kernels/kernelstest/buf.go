package kernelstest

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// buf is one operand of a case: its type, its layout and its whole block as host
// bytes; or an immediate (kernels.Scalar), or an absent operand.
type buf struct {
	dt     dtype.DType
	l      kernels.Layout
	data   []byte
	imm    *float64
	absent bool
}

// sentinel fills output blocks: a byte no kernel writes by accident.
const sentinel = 0xA5

// block makes a buffer of dt placed by l in a block of span elements (at least the
// layout's), every byte the sentinel.
func block(dt dtype.DType, l kernels.Layout, span int) *buf {
	span = max(span, l.Span())
	d := make([]byte, span*dt.Size())
	for i := range d {
		d[i] = sentinel
	}
	return &buf{dt: dt, l: l, data: d}
}

// out is an output of dt and l.
func out(dt dtype.DType, l kernels.Layout) *buf { return block(dt, l, l.Span()) }

// dense is an output of dt and shape, row-major.
func dense(dt dtype.DType, shape ...int) *buf { return out(dt, kernels.Contiguous(shape...)) }

// fill sets the buffer's elements (row-major over its layout) to v(i), rounded to its
// type; elements of the block outside the layout become NaN (integers: a large value)
// so that a kernel reading them shows.
func (b *buf) fill(v func(i int) float64) *buf {
	span := len(b.data) / b.dt.Size()
	for e := range span {
		put(b.dt, b.data, e, math.NaN())
		if !b.dt.IsFloat() {
			put(b.dt, b.data, e, 1<<20)
		}
	}
	for i, off := range offsets(b.l) {
		put(b.dt, b.data, off, v(i))
	}
	return b
}

// input makes an input of dt and l filled by v.
func input(dt dtype.DType, l kernels.Layout, v func(i int) float64) *buf {
	return block(dt, l, l.Span()).fill(v)
}

// imm is an immediate operand of v rounded to float32: a value that reads the same in
// an op of any type (testBinary's scalarReading checks how one that float32 does not
// hold is read).
func imm(v float64) *buf { return exactImm(float64(float32(v))) }

// exactImm is an immediate operand of v itself.
func exactImm(v float64) *buf { return &buf{imm: &v} }

// absent is an absent operand.
func absent() *buf { return &buf{absent: true} }

// values returns b's elements, row-major over its layout, from data.
func (b *buf) values(data []byte) []float64 {
	offs := offsets(b.l)
	v := make([]float64, len(offs))
	for i, off := range offs {
		v[i] = get(b.dt, data, off)
	}
	return v
}

// vals is values of b's own data (an input's exact values after rounding).
func (b *buf) vals() []float64 {
	if b.imm != nil {
		return []float64{*b.imm}
	}
	return b.values(b.data)
}

// offsets lists the element offsets of l in row-major order.
func offsets(l kernels.Layout) []int {
	n := l.Size()
	offs := make([]int, n)
	for i := range n {
		off, rem := l.Offset, i
		for d := len(l.Shape) - 1; d >= 0; d-- {
			off += (rem % l.Shape[d]) * l.Strides[d]
			rem /= l.Shape[d]
		}
		offs[i] = off
	}
	return offs
}

// bcast returns b's values broadcast to shape (numpy rules), row-major.
func (b *buf) bcast(shape []int) []float64 {
	if b.imm != nil || b.absent {
		v := 0.0
		if b.imm != nil {
			v = *b.imm
		}
		out := make([]float64, numel(shape))
		for i := range out {
			out[i] = v
		}
		return out
	}
	st := make([]int, len(shape))
	d := len(shape) - len(b.l.Shape)
	for i, n := range b.l.Shape {
		if n != 1 {
			st[d+i] = b.l.Strides[i]
		}
	}
	return (&buf{dt: b.dt, l: kernels.Layout{Shape: shape, Strides: st, Offset: b.l.Offset}}).values(b.data)
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// get reads element e of a block of dt as float64 (exact).
func get(dt dtype.DType, data []byte, e int) float64 {
	switch dt {
	case dtype.F64:
		return math.Float64frombits(binary.LittleEndian.Uint64(data[8*e:]))
	case dtype.F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(data[4*e:])))
	case dtype.F16:
		return float64(dtype.F16ToF32(binary.LittleEndian.Uint16(data[2*e:])))
	case dtype.BF16:
		return float64(dtype.BF16ToF32(binary.LittleEndian.Uint16(data[2*e:])))
	case dtype.I32:
		return float64(int32(binary.LittleEndian.Uint32(data[4*e:])))
	case dtype.I64:
		return float64(int64(binary.LittleEndian.Uint64(data[8*e:])))
	case dtype.Bool:
		return float64(data[e])
	}
	panic(fmt.Sprintf("kernelstest: type %v", dt))
}

// put writes v as element e of a block of dt: floats rounded once to dt, integers
// truncated.
func put(dt dtype.DType, data []byte, e int, v float64) {
	switch dt {
	case dtype.F64:
		binary.LittleEndian.PutUint64(data[8*e:], math.Float64bits(v))
	case dtype.F32:
		binary.LittleEndian.PutUint32(data[4*e:], math.Float32bits(float32(v)))
	case dtype.F16:
		binary.LittleEndian.PutUint16(data[2*e:], dtype.F64ToF16(v))
	case dtype.BF16:
		binary.LittleEndian.PutUint16(data[2*e:], dtype.F64ToBF16(v))
	case dtype.I32:
		binary.LittleEndian.PutUint32(data[4*e:], uint32(int32(v)))
	case dtype.I64:
		binary.LittleEndian.PutUint64(data[8*e:], uint64(int64(v)))
	case dtype.Bool:
		data[e] = 0
		if v != 0 {
			data[e] = 1
		}
	default:
		panic(fmt.Sprintf("kernelstest: type %v", dt))
	}
}

// kernelCall runs one case's kernels on be, with the case's operands in the order of
// its buffers. It takes the backend as an argument, never from the suite, so that the
// same call runs on the target and on kernels/cpu (a call that reached the target with
// kernels/cpu's host operands would read address 0 on a GPU).
type kernelCall func(be kernels.Backend, o []kernels.Operand)

// exec runs f on tg with the buffers as operands (in order) and returns every
// buffer's block as it is afterwards (nil for immediates and absent ones). The blocks
// go back to tg's memory however f ends, so that a failing case leaves the allocator
// as the next one expects it.
func exec(t testing.TB, tg Target, bufs []*buf, f kernelCall) [][]byte {
	t.Helper()
	ops := make([]kernels.Operand, len(bufs))
	mems := make([]kernels.Mem, len(bufs))
	placed := make([]bool, len(bufs))
	defer func() {
		for i := range bufs {
			if placed[i] {
				tg.Memory.Free(t, mems[i])
			}
		}
	}()
	for i, b := range bufs {
		switch {
		case b.absent:
		case b.imm != nil:
			ops[i] = kernels.Scalar(*b.imm)
		default:
			mems[i] = tg.Memory.Alloc(t, int64(len(b.data)))
			placed[i] = true
			tg.Memory.Write(t, mems[i], b.data)
			ops[i] = kernels.Operand{Layout: b.l, DType: b.dt, Mem: mems[i]}
		}
	}
	f(tg.Backend, ops)
	got := make([][]byte, len(bufs))
	for i, b := range bufs {
		if placed[i] {
			got[i] = tg.Memory.Read(t, mems[i])
			require.Len(t, got[i], len(b.data))
		}
	}
	return got
}

// tol is how far a result may be from the reference: |got-want| <= abs + rel·|want|.
type tol struct{ rel, abs float64 }

// exact is no tolerance at all.
var exact = tol{}

// within is the tolerance of an output of dt for an op that is accurate to f32 in
// float32, relative to the result or, near zero, to operands of about 1 (the cases'
// scale): an F16 or BF16 output may also be off by its rounding (two units in the
// last place); an F64 output, computed in float64, is held to float64's precision (in64).
func within(dt dtype.DType, f32 float64) tol {
	switch dt {
	case dtype.F16:
		f32 = max(f32, 1.0/512)
	case dtype.BF16:
		f32 = max(f32, 1.0/64)
	case dtype.F64:
		return in64(tol{rel: f32, abs: f32})
	}
	return tol{rel: f32, abs: f32}
}

// in64 is the float64 form of a tolerance t set for float32: as many units in the last
// place, times eight (the float64 references round too, in another order): t·2⁻²⁶.
// A float64 kernel computing in float32 anywhere is off by about 2²⁹ units.
func in64(t tol) tol { return tol{rel: t.rel * 0x1p-26, abs: t.abs * 0x1p-26} }

// tolIn is t for results of a kernel computing in dt's precision: in64(t) for F64.
func tolIn(dt dtype.DType, t tol) tol {
	if dt == dtype.F64 {
		return in64(t)
	}
	return t
}

// near asserts that want and got agree within tl, NaN matching NaN and infinities
// matching exactly.
func near(t testing.TB, what string, want, got []float64, tl tol) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i, w := range want {
		g := got[i]
		switch {
		case math.IsNaN(w):
			require.True(t, math.IsNaN(g), "%s: element %d: want NaN, got %v", what, i, g)
		case math.IsInf(w, 0) || tl == exact:
			require.Equal(t, w, g, "%s: element %d", what, i)
		default:
			require.LessOrEqual(t, math.Abs(g-w), tl.abs+tl.rel*math.Abs(w), "%s: element %d: want %v, got %v", what, i, w, g)
		}
	}
}

// untouched asserts that the bytes of got outside b's layout still hold the sentinel
// (b was made by out or dense).
func untouched(t testing.TB, what string, b *buf, got []byte) {
	t.Helper()
	in := make([]bool, len(got)/b.dt.Size())
	for _, off := range offsets(b.l) {
		in[off] = true
	}
	for e, inside := range in {
		if inside {
			continue
		}
		for j := range b.dt.Size() {
			require.Equal(t, byte(sentinel), got[e*b.dt.Size()+j], "%s: element %d of the block, outside the output, was written", what, e)
		}
	}
}

// result checks output b (index i of the buffers) after exec on the target and, when
// the target is not kernels/cpu, after the same on kernels/cpu: against want within
// tl, and nothing outside its layout written. It returns the target's values.
func (s *suite) result(t testing.TB, what string, bufs []*buf, i int, want []float64, tl tol, f kernelCall) []float64 {
	t.Helper()
	got := exec(t, s.tg, bufs, f)
	b := bufs[i]
	untouched(t, what, b, got[i])
	vals := b.values(got[i])
	near(t, what, want, vals, tl)
	if s.cpu != nil {
		ref := exec(t, Target{s.cpu, HostMemory()}, bufs, f)
		near(t, what+" (against kernels/cpu)", b.values(ref[i]), vals, tl)
	}
	return vals
}

// floats are the float types every float kernel is run with.
var floats = []dtype.DType{dtype.F32, dtype.F16, dtype.BF16, dtype.F64}

// rowTypes are the types the row kernels compute in.
var rowTypes = []dtype.DType{dtype.F32, dtype.F64}

// layouts are the input layouts of shape [4, 6] elementwise cases run with: row-major,
// transposed (column-major), a strided slice with gaps and an offset, and two
// broadcasts.
func layouts() map[string]kernels.Layout {
	return map[string]kernels.Layout{
		"contiguous": kernels.Contiguous(4, 6),
		"transposed": {Shape: []int{4, 6}, Strides: []int{1, 4}},
		"strided":    {Shape: []int{4, 6}, Strides: []int{14, 2}, Offset: 3},
		"row":        {Shape: []int{6}, Strides: []int{1}},
		"column":     {Shape: []int{4, 1}, Strides: []int{1, 0}, Offset: 1},
	}
}
