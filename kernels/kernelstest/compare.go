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

// testCompare runs the comparison family: Compare, Where and Sum into I64 (and Mean
// of Bool), against references computed here in float64 and int64.
func testCompare(t *testing.T, s *suite) {
	t.Run("Compare", func(t *testing.T) { testCompareOps(t, s) })
	t.Run("CompareRounding", func(t *testing.T) { testCompareRounding(t, s) })
	t.Run("Where", func(t *testing.T) { testWhere(t, s) })
	t.Run("IntegerSum", func(t *testing.T) { testIntegerSum(t, s) })
}

// refCompare is op(a, b) as 0 or 1.
func refCompare[T int64 | float64](op kernels.CompareOp, a, b T) float64 {
	var r bool
	switch op {
	case kernels.Eq:
		r = a == b
	case kernels.Ne:
		r = a != b
	case kernels.Lt:
		r = a < b
	case kernels.Le:
		r = a <= b
	case kernels.Gt:
		r = a > b
	case kernels.Ge:
		r = a >= b
	}
	if r {
		return 1
	}
	return 0
}

// compareValue is element i of a comparison operand of dt: few distinct values, so
// that equal pairs are common, and a NaN now and then in floating operands.
func compareValue(dt dtype.DType, salt int) func(int) float64 {
	return func(i int) float64 {
		k := (i*7 + salt) % 5
		switch {
		case dt == dtype.Bool:
			return float64(k % 2)
		case !dt.IsFloat():
			return float64(k - 2)
		case i%11 == 3:
			return math.NaN()
		}
		return float64(k-2) * 0.75
	}
}

func testCompareOps(t *testing.T, s *suite) {
	// Each pair with the type PyTorch compares it in.
	pairs := []struct{ a, b, in dtype.DType }{
		{dtype.F32, dtype.F32, dtype.F32}, {dtype.F16, dtype.F16, dtype.F16}, {dtype.BF16, dtype.BF16, dtype.BF16},
		{dtype.F64, dtype.F64, dtype.F64}, {dtype.F16, dtype.F32, dtype.F32}, {dtype.BF16, dtype.F16, dtype.F32},
		{dtype.F64, dtype.F16, dtype.F64}, {dtype.I64, dtype.F16, dtype.F16}, {dtype.I32, dtype.F32, dtype.F32},
		{dtype.I64, dtype.F64, dtype.F64}, {dtype.Bool, dtype.BF16, dtype.BF16},
		{dtype.I64, dtype.I64, dtype.I64}, {dtype.I32, dtype.I64, dtype.I64}, {dtype.Bool, dtype.I32, dtype.I64},
		{dtype.Bool, dtype.Bool, dtype.I64},
	}
	ls := layouts()
	for _, p := range pairs {
		for _, name := range sorted(ls) {
			a := input(p.a, ls[name], compareValue(p.a, 0))
			b := input(p.b, kernels.Contiguous(4, 6), compareValue(p.b, 3))
			require.Equal(t, p.in, kernels.CompareType(operandOf(a), operandOf(b)), "CompareType(%v, %v)", p.a, p.b)
			as, bs := a.bcast([]int{4, 6}), b.vals()
			for op := kernels.Eq; op.Valid(); op++ {
				want := make([]float64, 24)
				for i := range want {
					want[i] = refCompare(op, as[i], bs[i])
				}
				s.result(t, fmt.Sprintf("%v %v %s with %v", op, p.a, name, p.b), []*buf{dense(dtype.Bool, 4, 6), a, b}, 0, want, exact,
					func(be kernels.Backend, o []kernels.Operand) { be.Compare(op, o[0], o[1], o[2]) })
			}
		}
	}
	// A strided output, a Scalar on either side, and no elements.
	x := input(dtype.F32, kernels.Contiguous(4, 6), compareValue(dtype.F32, 1))
	xs := x.vals()
	tw := make([]float64, 24) // x >= 0.75 read into the transposed output's row-major order
	for i := range 4 {
		for j := range 6 {
			tw[j*4+i] = refCompare(kernels.Ge, xs[i*6+j], 0.75)
		}
	}
	s.result(t, "ge into a transposed output", []*buf{out(dtype.Bool, kernels.Layout{Shape: []int{6, 4}, Strides: []int{1, 6}}), x, exactImm(0.75)},
		0, tw, exact, func(be kernels.Backend, o []kernels.Operand) {
			src := o[1]
			src.Layout = kernels.Layout{Shape: []int{6, 4}, Strides: []int{1, 6}}
			be.Compare(kernels.Ge, o[0], src, o[2])
		})
	want := make([]float64, 24)
	for i, v := range xs {
		want[i] = refCompare(kernels.Lt, -0.75, v)
	}
	s.result(t, "Scalar < x", []*buf{dense(dtype.Bool, 4, 6), exactImm(-0.75), x}, 0, want, exact,
		func(be kernels.Backend, o []kernels.Operand) { be.Compare(kernels.Lt, o[0], o[1], o[2]) })
	s.result(t, "empty", []*buf{dense(dtype.Bool, 3, 0), input(dtype.F32, kernels.Contiguous(3, 0), nil), exactImm(1)}, 0, nil, exact,
		func(be kernels.Backend, o []kernels.Operand) { be.Compare(kernels.Eq, o[0], o[1], o[2]) })
}

// operandOf is b as the operand exec would pass (its memory left out): what
// CompareType reads.
func operandOf(b *buf) kernels.Operand {
	if b.imm != nil {
		return kernels.Scalar(*b.imm)
	}
	return kernels.Operand{Layout: b.l, DType: b.dt}
}

// ints makes an input of dt (I32, I64) and shape whose row-major elements are vs,
// written as integers (float64 does not hold every int64).
func ints(dt dtype.DType, vs []int64, shape ...int) *buf {
	b := block(dt, kernels.Contiguous(shape...), 0)
	for i, v := range vs {
		if dt == dtype.I64 {
			binary.LittleEndian.PutUint64(b.data[8*i:], uint64(v))
		} else {
			binary.LittleEndian.PutUint32(b.data[4*i:], uint32(int32(v)))
		}
	}
	return b
}

// testCompareRounding: each operand is rounded once to the comparison's type, as
// PyTorch converts both to their result type: an int64 to F16 or F32, a Scalar to
// the tensor's type; integers compare exactly, beyond float64's 2⁵³ too.
func testCompareRounding(t *testing.T, s *suite) {
	one := func(dt dtype.DType, v float64) *buf {
		return input(dt, kernels.Contiguous(1), func(int) float64 { return v })
	}
	for _, c := range []struct {
		what string
		op   kernels.CompareOp
		a, b *buf
		want float64
	}{
		{"int64 2049 == F16 2048: 2049 rounds to 2048 in F16", kernels.Eq, ints(dtype.I64, []int64{2049}, 1), one(dtype.F16, 2048), 1},
		{"int64 2⁲⁴+1 == F32 2²⁴", kernels.Eq, ints(dtype.I64, []int64{1<<24 + 1}, 1), one(dtype.F32, 1<<24), 1},
		{"int64 2⁵³+1 == int64 2⁵³: exact", kernels.Eq, ints(dtype.I64, []int64{1<<53 + 1}, 1), ints(dtype.I64, []int64{1 << 53}, 1), 0},
		{"int64 2⁵³+1 > int32 7: exact", kernels.Gt, ints(dtype.I64, []int64{1<<53 + 1}, 1), ints(dtype.I32, []int64{7}, 1), 1},
		{"int64 -2⁶³ < Scalar(2⁶²)", kernels.Lt, ints(dtype.I64, []int64{math.MinInt64}, 1), exactImm(1 << 62), 1},
		{"int64 2⁲⁴+1 == Scalar(2²⁴): an integer Scalar compares exactly", kernels.Eq, ints(dtype.I64, []int64{1<<24 + 1}, 1), exactImm(1 << 24), 0},
		{"int64 2⁲⁴+1 > Scalar(2²⁴+0.5): in F32, both 2²⁴", kernels.Gt, ints(dtype.I64, []int64{1<<24 + 1}, 1), exactImm(1<<24 + 0.5), 0},
		{"int64 2 > Scalar(1.5)", kernels.Gt, ints(dtype.I64, []int64{2}, 1), exactImm(1.5), 1},
		{"F64 0.1 == Scalar(0.1)", kernels.Eq, one(dtype.F64, 0.1), exactImm(0.1), 1},
		{"F64 float32(0.1) == Scalar(0.1): 0.1 stays float64", kernels.Eq, one(dtype.F64, float64(float32(0.1))), exactImm(0.1), 0},
		{"F32 0.1 == Scalar(0.1)", kernels.Eq, one(dtype.F32, 0.1), exactImm(0.1), 1},
		{"F16 0.1 == Scalar(0.1): the Scalar rounds to F16", kernels.Eq, one(dtype.F16, 0.1), exactImm(0.1), 1},
		{"BF16 0.1 <= Scalar(0.1)", kernels.Le, one(dtype.BF16, 0.1), exactImm(0.1), 1},
		{"Bool true == Scalar(1)", kernels.Eq, one(dtype.Bool, 1), exactImm(1), 1},
		{"NaN != NaN", kernels.Ne, one(dtype.F32, math.NaN()), one(dtype.F64, math.NaN()), 1},
		{"NaN == NaN", kernels.Eq, one(dtype.F32, math.NaN()), one(dtype.F32, math.NaN()), 0},
		{"NaN >= Scalar(-Inf)", kernels.Ge, one(dtype.F16, math.NaN()), exactImm(math.Inf(-1)), 0},
		{"-0 == 0", kernels.Eq, one(dtype.F32, math.Copysign(0, -1)), one(dtype.BF16, 0), 1},
	} {
		s.result(t, c.what, []*buf{dense(dtype.Bool, 1), c.a, c.b}, 0, []float64{c.want}, exact,
			func(be kernels.Backend, o []kernels.Operand) { be.Compare(c.op, o[0], o[1], o[2]) })
	}
}

func testWhere(t *testing.T, s *suite) {
	ls := layouts()
	cond := input(dtype.Bool, kernels.Contiguous(4, 6), func(i int) float64 { return float64(i % 3 % 2) })
	cs := cond.vals()
	for _, odt := range floats {
		for _, adt := range []dtype.DType{odt, dtype.F32, dtype.F64, dtype.I64} {
			for _, name := range sorted(ls) {
				a := input(adt, ls[name], s.uniform(-3, 3))
				if !adt.IsFloat() {
					a = input(adt, ls[name], compareValue(adt, 1))
				}
				b := input(odt, kernels.Contiguous(4, 6), s.uniform(-3, 3))
				as, bs := a.bcast([]int{4, 6}), b.vals()
				want := make([]float64, 24)
				for i := range want {
					want[i] = odt.Round(bs[i])
					if cs[i] != 0 {
						want[i] = odt.Round(as[i])
					}
				}
				s.result(t, fmt.Sprintf("where into %v from %v %s and %v", odt, adt, name, odt), []*buf{dense(odt, 4, 6), cond, a, b}, 0, want, exact,
					func(be kernels.Backend, o []kernels.Operand) { be.Where(o[0], o[1], o[2], o[3]) })
			}
		}
		// A broadcast condition, a Scalar, in place.
		x := input(odt, kernels.Contiguous(4, 6), s.uniform(-3, 3))
		row := input(dtype.Bool, kernels.Contiguous(6), func(i int) float64 { return float64(i % 2) })
		xs, rs := x.vals(), row.vals()
		want := make([]float64, 24)
		for i := range want {
			want[i] = xs[i]
			if rs[i%6] != 0 {
				want[i] = odt.Round(float64(float32(0.1)))
				if odt == dtype.F64 {
					want[i] = 0.1
				}
			}
		}
		s.result(t, fmt.Sprintf("masked fill of %v in place", odt), []*buf{x, row, exactImm(0.1)}, 0, want, exact,
			func(be kernels.Backend, o []kernels.Operand) { be.Where(o[0], o[1], o[2], o[0]) })
	}
	// Integer outputs take integers exactly.
	for _, odt := range []dtype.DType{dtype.I64, dtype.I32, dtype.Bool} {
		a := ints(dtype.I64, []int64{1<<53 + 1, -5, 0, 7, 1 << 40, 2}, 2, 3)
		b := ints(dtype.I32, []int64{-1, 9, 4, 0, 3, -8}, 2, 3)
		c := input(dtype.Bool, kernels.Contiguous(3), func(i int) float64 { return float64(i % 2) })
		got := exec(t, s.tg, []*buf{dense(odt, 2, 3), c, a, exactImm(-4)}, func(be kernels.Backend, o []kernels.Operand) { be.Where(o[0], o[1], o[2], o[3]) })
		want := []int64{-4, -5, -4, -4, 1 << 40, -4}
		for i, w := range want {
			switch odt {
			case dtype.I32:
				w = int64(int32(w))
			case dtype.Bool:
				w = min(1, abs64(w))
			}
			require.Equal(t, w, intAt(odt, got[0], i), "where into %v from int64, element %d", odt, i)
		}
		got = exec(t, s.tg, []*buf{dense(odt, 2, 3), c, a, b}, func(be kernels.Backend, o []kernels.Operand) { be.Where(o[0], o[1], o[2], o[3]) })
		if odt == dtype.I64 {
			require.Equal(t, []int64{-1, -5, 4, 0, 1 << 40, -8}, []int64{intAt(odt, got[0], 0), intAt(odt, got[0], 1), intAt(odt, got[0], 2),
				intAt(odt, got[0], 3), intAt(odt, got[0], 4), intAt(odt, got[0], 5)})
		}
	}
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// intAt reads element e of a block of an integer type or Bool as an int64, exactly.
func intAt(dt dtype.DType, data []byte, e int) int64 {
	switch dt {
	case dtype.I64:
		return int64(binary.LittleEndian.Uint64(data[8*e:]))
	case dtype.I32:
		return int64(int32(binary.LittleEndian.Uint32(data[4*e:])))
	}
	return int64(data[e])
}

// testIntegerSum: Sum into I64 adds integers and Bools exactly (PyTorch's sum of a
// Bool or integer tensor), over every layout and reduction; Mean of a Bool into a
// float type is the fraction of true elements.
func testIntegerSum(t *testing.T, s *suite) {
	ls := layouts()
	for _, dt := range []dtype.DType{dtype.Bool, dtype.I32, dtype.I64} {
		for _, name := range []string{"contiguous", "transposed", "strided"} {
			x := input(dt, ls[name], compareValue(dt, 2))
			for _, dst := range [][]int{{1, 6}, {4, 1}, {6}, nil} {
				want, _ := refReduce(x, dst, false)
				got := exec(t, s.tg, []*buf{dense(dtype.I64, dst...), x}, func(be kernels.Backend, o []kernels.Operand) { be.Sum(o[0], o[1]) })
				for i, w := range want {
					require.Equal(t, int64(w), intAt(dtype.I64, got[0], i), "sum of %v %s into %v: element %d", dt, name, dst, i)
				}
			}
			for _, odt := range []dtype.DType{dtype.F32, dtype.F64} {
				want, _ := refReduce(x, []int{4, 1}, true)
				s.result(t, fmt.Sprintf("mean of %v %s into %v", dt, name, odt), []*buf{dense(odt, 4, 1), x}, 0, want, within(odt, 1e-7),
					func(be kernels.Backend, o []kernels.Operand) { be.Mean(o[0], o[1]) })
			}
		}
	}
	// Beyond 2⁵³, and wrapping as int64 does.
	big := ints(dtype.I64, []int64{1 << 62, 1, 1 << 62, 3, 1 << 62, -1}, 2, 3)
	got := exec(t, s.tg, []*buf{dense(dtype.I64, 2, 1), big}, func(be kernels.Backend, o []kernels.Operand) { be.Sum(o[0], o[1]) })
	require.Equal(t, int64(math.MinInt64+1), intAt(dtype.I64, got[0], 0), "2⁶²+1+2⁶² wraps")
	require.Equal(t, int64(1<<62+2), intAt(dtype.I64, got[0], 1), "3+2⁶²−1, exact beyond 2⁵³")
	// A strided output: nothing else written.
	x := input(dtype.Bool, kernels.Contiguous(4, 6), compareValue(dtype.Bool, 0))
	want, _ := refReduce(x, []int{4, 1}, false)
	o := out(dtype.I64, kernels.Layout{Shape: []int{4, 1}, Strides: []int{3, 1}, Offset: 1})
	got = exec(t, s.tg, []*buf{o, x}, func(be kernels.Backend, ops []kernels.Operand) { be.Sum(ops[0], ops[1]) })
	untouched(t, "sum into a strided I64 output", o, got[0])
	for i, w := range want {
		require.Equal(t, int64(w), intAt(dtype.I64, got[0], 1+3*i), "strided output, element %d", i)
	}
}
