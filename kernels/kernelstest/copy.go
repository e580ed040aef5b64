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

// allTypes are every element type Copy and Fill take.
var allTypes = []dtype.DType{dtype.F64, dtype.F32, dtype.F16, dtype.BF16, dtype.I32, dtype.I64, dtype.Bool}

func isInt(dt dtype.DType) bool { return dt == dtype.I32 || dt == dtype.I64 || dt == dtype.Bool }

// refConvert is Copy's conversion of v (exactly representable in src) to dst: integer
// to integer through int64 (wrapping; to Bool: v != 0); a conversion that involves F64
// through float64, everything else through float32 (exact but for I64 values float32
// does not hold); floats rounding to nearest even once, float to integer truncating,
// saturating, NaN to 0, anything to Bool v != 0. It returns the stored value as
// float64.
func refConvert(v float64, src, dst dtype.DType) float64 {
	switch {
	case isInt(src) && isInt(dst):
		switch dst {
		case dtype.I32:
			return float64(int32(int64(v)))
		case dtype.Bool:
			return b2f(v != 0)
		}
		return v
	case src == dtype.F64 || dst == dtype.F64:
		return toType(v, dst)
	}
	return toType(float64(float32(v)), dst)
}

// toType is a float64's conversion to dt: floats rounded to nearest even once,
// integers truncated, saturated, NaN to 0, Bool v != 0.
func toType(v float64, dt dtype.DType) float64 {
	switch dt {
	case dtype.I32:
		return float64(f64ToInt(v, math.MinInt32, math.MaxInt32))
	case dtype.I64:
		return float64(f64ToInt(v, math.MinInt64, math.MaxInt64))
	case dtype.Bool:
		return b2f(v != 0)
	}
	var b [8]byte
	put(dt, b[:], 0, v)
	return get(dt, b[:], 0)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// copyValues are source values that exercise every rule: fractions, negatives, ±0,
// values past int32's range (saturation, wrapping), NaN and infinities for floats; for
// F64 also values past float32's range and ones float32 would round onto a tie of F16
// and BF16 (1+2⁻¹¹+2⁻⁴⁰ is 1+2⁻¹⁰ in F16, 1 through float32; 1+2⁻⁸+2⁻⁴⁰ the same for
// BF16), which must round once.
func copyValues(src dtype.DType) []float64 {
	v := []float64{0, 1, -1, 2.5, -2.5, 3.75, -7, 1e6 + 0.5, 65504, 1 << 24, 1<<24 + 1}
	switch src {
	case dtype.F64:
		v = append(v, math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 3e9, -3e9, 1e20, 70000.3,
			0.1, 1e300, -1e300, 1e-300, 1+0x1p-11+0x1p-40, -(1 + 0x1p-8 + 0x1p-40), 1<<53, 9.3e18, -9.3e18)
	case dtype.F32, dtype.F16, dtype.BF16:
		v = append(v, math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 3e9, -3e9, 1e20, 70000.3)
	case dtype.I64:
		v = append(v, 1<<40+5, -(1<<40 + 5), 3e9)
	case dtype.Bool:
		v = []float64{0, 1, 1, 0}
	}
	return v
}

func testCopy(t *testing.T, s *suite) {
	for _, src := range allTypes {
		vals := copyValues(src)
		n := len(vals)
		for _, dst := range allTypes {
			for _, name := range []string{"contiguous", "strided", "broadcast"} {
				l := kernels.Contiguous(n)
				switch name {
				case "strided":
					l = kernels.Layout{Shape: []int{n}, Strides: []int{3}, Offset: 2}
				case "broadcast":
					l = kernels.Layout{Shape: []int{1, n}, Strides: []int{0, 1}}
				}
				x := input(src, l, func(i int) float64 { return vals[i] })
				xs := x.vals()
				shape := []int{n}
				if name == "broadcast" {
					shape = []int{3, n}
				}
				xb := x.bcast(shape)
				want := make([]float64, len(xb))
				for i, v := range xb {
					want[i] = refConvert(v, src, dst)
				}
				d := dense(dst, shape...)
				got := exec(t, s.tg, []*buf{d, x}, func(be kernels.Backend, o []kernels.Operand) { be.Copy(o[0], o[1]) })
				what := fmt.Sprintf("%v to %v, %s", src, dst, name)
				untouched(t, what, d, got[0])
				near(t, what, want, d.values(got[0]), exact)
				if src == dst && name == "contiguous" {
					// The same type copies the bits, NaN payloads included.
					require.Equal(t, x.data, got[0], what)
				}
				_ = xs
			}
		}
	}
	// Transposed views of every type made dense (cuda: tiles of 32×32, the last ones
	// partial), the bits as they are.
	for _, dt := range allTypes {
		vals := copyValues(dt)
		x := input(dt, kernels.Layout{Shape: []int{70, 45}, Strides: []int{1, 70}}, func(i int) float64 { return vals[i%len(vals)] })
		d := dense(dt, 70, 45)
		got := exec(t, s.tg, []*buf{d, x}, func(be kernels.Backend, o []kernels.Operand) { be.Copy(o[0], o[1]) })
		near(t, fmt.Sprintf("%v transposed", dt), x.vals(), d.values(got[0]), exact)
	}
	// Transposed views made dense, byte for byte: cuda moves 16-byte words where every
	// output row and source column is whole aligned words of 2- or 4-byte elements
	// (copy_transpose_words: partial tiles, a column slice of a wider source, an output
	// with a row pitch of its own), tiles of elements where an offset or a length breaks
	// the words, the element-wise walk for a batch of transposes.
	for _, c := range []struct {
		name string
		src  kernels.Layout
		dst  kernels.Layout
	}{
		{"whole tiles", kernels.Layout{Shape: []int{256, 128}, Strides: []int{1, 256}}, kernels.Contiguous(256, 128)},
		{"partial tiles of a wider source", kernels.Layout{Shape: []int{136, 72}, Strides: []int{1, 200}, Offset: 16}, kernels.Contiguous(136, 72)},
		{"into rows of a wider output", kernels.Layout{Shape: []int{136, 72}, Strides: []int{1, 136}}, kernels.Layout{Shape: []int{136, 72}, Strides: []int{80, 1}, Offset: 8}},
		{"a source off the words", kernels.Layout{Shape: []int{136, 72}, Strides: []int{1, 136}, Offset: 1}, kernels.Contiguous(136, 72)},
		{"rows not whole words", kernels.Layout{Shape: []int{72, 42}, Strides: []int{1, 72}}, kernels.Contiguous(72, 42)},
		{"a batch", kernels.Layout{Shape: []int{3, 40, 24}, Strides: []int{1000, 1, 40}}, kernels.Contiguous(3, 40, 24)},
	} {
		for _, dt := range []dtype.DType{dtype.F64, dtype.F32, dtype.F16, dtype.BF16, dtype.I32, dtype.I64} {
			what := fmt.Sprintf("%v transposed, %s", dt, c.name)
			x := block(dt, c.src, c.src.Span())
			for i, off := range offsets(c.src) { // distinct patterns, NaNs among them
				var b [8]byte
				binary.LittleEndian.PutUint64(b[:], uint64(i+1)*0x9e3779b97f4a7c15)
				copy(x.data[off*dt.Size():], b[:dt.Size()])
			}
			d := out(dt, c.dst)
			got := exec(t, s.tg, []*buf{d, x}, func(be kernels.Backend, o []kernels.Operand) { be.Copy(o[0], o[1]) })
			untouched(t, what, d, got[0])
			so := offsets(c.src)
			for i, off := range offsets(c.dst) {
				e := dt.Size()
				require.Equal(t, x.data[so[i]*e:so[i]*e+e], got[0][off*e:off*e+e], "%s: element %d", what, i)
			}
		}
	}
	// Materializing a transposed view into a strided destination.
	x := input(dtype.F16, kernels.Layout{Shape: []int{3, 4}, Strides: []int{1, 3}}, s.uniform(-5, 5))
	d := out(dtype.F32, kernels.Layout{Shape: []int{3, 4}, Strides: []int{8, 2}, Offset: 1})
	s.result(t, "transposed into strided", []*buf{d, x}, 0, x.vals(), exact,
		func(be kernels.Backend, o []kernels.Operand) { be.Copy(o[0], o[1]) })
	s.result(t, "empty", []*buf{dense(dtype.I64, 0, 5), input(dtype.F32, kernels.Contiguous(0, 5), nil)}, 0, nil, exact,
		func(be kernels.Backend, o []kernels.Operand) { be.Copy(o[0], o[1]) })
}

func testFill(t *testing.T, s *suite) {
	for _, dt := range allTypes {
		for _, v := range []float64{0, 1.5, -2.75, math.NaN(), math.Inf(-1), 3e9, 1e40, 16777217, 0.1, 1 + 0x1p-11 + 0x1p-40, 1e300} {
			for _, l := range []kernels.Layout{kernels.Contiguous(3, 5), {Shape: []int{3, 5}, Strides: []int{1, 4}, Offset: 2}, kernels.Contiguous(0, 2)} {
				d := out(dt, l)
				want := make([]float64, l.Size())
				for i := range want {
					want[i] = toType(v, dt) // Fill converts the float64 itself
				}
				s.result(t, fmt.Sprintf("%v %v %v", dt, v, l), []*buf{d}, 0, want, exact,
					func(be kernels.Backend, o []kernels.Operand) { be.Fill(o[0], v) })
			}
		}
	}
}
