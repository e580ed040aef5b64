package cpu

import (
	"fmt"
	"math"

	"github.com/subletml/sublet/dtype"
)

// Copy writes src into dst, converting the element type when they differ. src
// broadcasts to dst's shape, so Copy also materializes views: transpose, permute,
// slice, expand, and the pieces of concat and stack (copy each input into its slice of
// the output; their backward copies the slices out). dst must not overlap src.
//
// Conversions: float to float rounds to nearest even, once (F64 to F16 is not rounded
// to float32 first); a conversion that involves F64 goes through float64, every other
// one through float32 (exact for F16, BF16, I32 and Bool); float to integer truncates
// toward zero, saturates at the type's range and sends NaN to 0; integer to integer
// wraps as Go's conversions do; anything to Bool is (x != 0), so NaN is true.
func Copy(dst, src Operand) {
	dst.requireWritable("copy")
	s := copyState{dst: dst, src: src, it: newIter("copy", dst.Layout, src.Layout), viaF64: wide(dst, src)}
	forRange(s.it.size, grain, s)
}

// copyState is what each piece of a Copy reads.
type copyState struct {
	dst, src Operand
	it       iter
	viaF64   bool // an operand is F64: conversions go through float64
}

func (c copyState) run(lo, hi int) {
	var buf [chunk]float32
	var buf64 [chunk]float64
	var ibuf [chunk]int64
	dst, src := c.dst, c.src
	c.it.walk(lo, hi, func(offs, inner [maxOperands]int, n int) {
		d, s := offs[0], offs[1]
		ds, ss := inner[0], inner[1]
		switch {
		case dst.dt == src.dt:
			copySame(dst, d, ds, src, s, ss, n)
		case isInt(dst.dt) && isInt(src.dt):
			storeInts(dst, d, ds, loadInts(src, s, ss, n, &ibuf))
		case c.viaF64:
			storeFloats(dst, d, ds, load(&src, s, ss, n, &buf64))
		default:
			storeFloats(dst, d, ds, load(&src, s, ss, n, &buf))
		}
	})
}

// Fill sets every element of dst to v, converted to dst's type as Copy converts a
// float64 (rounded once to a float type; NaN to 0 for integers, x != 0 for Bool).
func Fill(dst Operand, v float64) {
	dst.requireWritable("fill")
	f := fillState{dst: dst, it: newIter("fill", dst.Layout), bits: FillBits(dst.dt, v)}
	forRange(f.it.size, grain, f)
}

// fillState is what each piece of a Fill reads.
type fillState struct {
	dst  Operand
	it   iter
	bits uint64 // FillBits of the value
}

func (f fillState) run(lo, hi int) {
	dst, bits := f.dst, f.bits
	f.it.walk(lo, hi, func(offs, inner [maxOperands]int, n int) {
		o, s := offs[0], inner[0]
		switch dst.dt {
		case dtype.F32:
			fillRun(dst.f32s(), o, s, n, math.Float32frombits(uint32(bits)))
		case dtype.F64:
			fillRun(dst.f64s(), o, s, n, math.Float64frombits(bits))
		case dtype.F16, dtype.BF16:
			fillRun(dst.u16s(), o, s, n, uint16(bits))
		case dtype.I32:
			fillRun(dst.i32s(), o, s, n, int32(bits))
		case dtype.I64:
			fillRun(dst.i64s(), o, s, n, int64(bits))
		case dtype.Bool:
			fillRun(dst.u8s(), o, s, n, uint8(bits))
		}
	})
}

// FillBits is v converted to dt as Fill writes it, as the bits of one element (in the
// low bytes): float types rounded once from float64 (dtype's conversions), integers
// truncated toward zero and saturated (NaN is 0), Bool 1 for any v but 0. A GPU
// backend fills with these bits, so that both backends write the same elements.
func FillBits(dt dtype.DType, v float64) uint64 {
	switch dt {
	case dtype.F32:
		return uint64(math.Float32bits(float32(v)))
	case dtype.F64:
		return math.Float64bits(v)
	case dtype.F16:
		return uint64(dtype.F64ToF16(v))
	case dtype.BF16:
		return uint64(dtype.F64ToBF16(v))
	case dtype.I32:
		return uint64(uint32(int32(f64ToInt(v, math.MinInt32, math.MaxInt32))))
	case dtype.I64:
		return uint64(f64ToInt(v, math.MinInt64, math.MaxInt64))
	case dtype.Bool:
		return uint64(boolByte(v != 0))
	}
	panic(fmt.Sprintf("kernels/cpu: fill: type %v", dt))
}

// Axpy adds alpha·x into dst elementwise (gradient accumulation: dst += x), alpha
// rounded to the type the kernel computes in. x broadcasts to dst's shape and must not
// overlap dst.
func Axpy(dst Operand, alpha float64, x Operand) {
	byType(axpy[float32], axpy[float64], dst.dt, x.dt)(dst, alpha, x)
}

func axpy[T float](dst Operand, alpha float64, x Operand) {
	elementwise("axpy", dst, []Operand{dst, x}, axpyKernel[T]{T(alpha)})
}

type axpyKernel[T float] struct{ alpha T }

func (k axpyKernel[T]) run(out []T, in eltIns[T]) {
	zipRun(out, in[0], in[1], func(d, v T) T { return d + k.alpha*v })
}

func isInt(d dtype.DType) bool { return d == dtype.I32 || d == dtype.I64 || d == dtype.Bool }

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func copyRun[T any](dst []T, d, ds int, src []T, s, ss, n int) {
	if ds == 1 && ss == 1 {
		copy(dst[d:d+n], src[s:s+n])
		return
	}
	for i := range n {
		dst[d+i*ds] = src[s+i*ss]
	}
}

func fillRun[T any](dst []T, off, s, n int, v T) {
	for i := range n {
		dst[off+i*s] = v
	}
}

func copySame(dst Operand, d, ds int, src Operand, s, ss, n int) {
	switch dst.dt.Size() {
	case 1:
		copyRun(dst.u8s(), d, ds, src.u8s(), s, ss, n)
	case 2:
		copyRun(dst.u16s(), d, ds, src.u16s(), s, ss, n)
	case 4:
		copyRun(dst.i32s(), d, ds, src.i32s(), s, ss, n)
	case 8:
		copyRun(dst.i64s(), d, ds, src.i64s(), s, ss, n)
	}
}

func loadInts(o Operand, off, s, n int, buf *[chunk]int64) []int64 {
	v := buf[:n]
	switch o.dt {
	case dtype.I32:
		gather(v, o.i32s(), off, s, func(x int32) int64 { return int64(x) })
	case dtype.I64:
		gather(v, o.i64s(), off, s, func(x int64) int64 { return x })
	case dtype.Bool:
		gather(v, o.u8s(), off, s, func(x uint8) int64 { return int64(x) })
	}
	return v
}

func storeInts(o Operand, off, s int, v []int64) {
	switch o.dt {
	case dtype.I32:
		scatter(o.i32s(), off, s, v, func(x int64) int32 { return int32(x) })
	case dtype.I64:
		scatter(o.i64s(), off, s, v, func(x int64) int64 { return x })
	case dtype.Bool:
		scatter(o.u8s(), off, s, v, func(x int64) uint8 { return boolByte(x != 0) })
	}
}

// storeFloats stores values of T into any dtype.
func storeFloats[T float](o Operand, off, s int, v []T) {
	switch o.dt {
	case dtype.F32, dtype.F16, dtype.BF16, dtype.F64:
		if o.dt == native[T]() && s == 1 {
			copy(elems[T](&o)[off:off+len(v)], v)
			return
		}
		flush(&o, off, s, v)
	case dtype.I32:
		scatter(o.i32s(), off, s, v, func(x T) int32 {
			return int32(f64ToInt(float64(x), math.MinInt32, math.MaxInt32))
		})
	case dtype.I64:
		scatter(o.i64s(), off, s, v, func(x T) int64 {
			return f64ToInt(float64(x), math.MinInt64, math.MaxInt64)
		})
	case dtype.Bool:
		scatter(o.u8s(), off, s, v, func(x T) uint8 { return boolByte(x != 0) })
	}
}

// f64ToInt converts a float to an integer range [lo, hi] the same way on every
// architecture: truncation toward zero, NaN to 0, saturation at the ends. float64(hi)
// may round up (to 2^63 for MaxInt64); every float below it converts exactly.
func f64ToInt(f float64, lo, hi int64) int64 {
	switch {
	case f != f:
		return 0
	case f <= float64(lo):
		return lo
	case f >= float64(hi):
		return hi
	}
	return int64(f)
}
