package kernelstest

import (
	"fmt"
	"math"
	"sort"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/kernelstest/ref"
)

// uniform returns a generator of values in [lo, hi).
func (s *suite) uniform(lo, hi float64) func(int) float64 {
	return func(int) float64 { return lo + (hi-lo)*s.r.Float64() }
}

// unaryDomain is where op's inputs are drawn from: where it is defined and well
// conditioned.
func unaryDomain(op kernels.UnaryOp) (lo, hi float64) {
	if op == kernels.Log || op == kernels.Sqrt {
		return 0.25, 4
	}
	return -3, 3
}

// sorted returns the keys of a layout map in order, so subtests run in a fixed order.
func sorted(m map[string]kernels.Layout) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

// unaryTol is the float32 accuracy of op and of its derivative.
func unaryTol(op kernels.UnaryOp) float64 {
	switch op {
	case kernels.Neg, kernels.Abs, kernels.Relu:
		return 1e-7
	}
	return 4e-6
}

// binaryTol is the float32 tolerance of the binary op op against the float64
// reference: looser for Pow and Div.
func binaryTol(op kernels.BinaryOp) float64 {
	if op == kernels.Pow || op == kernels.Div {
		return 4e-6
	}
	return 1e-7
}

// outTypes are the output types of an elementwise case with inputs of dt: dt itself,
// F32 and F64 (an F64 output of float32 inputs is computed in float64, an F32 output
// of F64 ones too).
func outTypes(dt dtype.DType) []dtype.DType {
	out := []dtype.DType{dt}
	for _, o := range []dtype.DType{dtype.F32, dtype.F64} {
		if o != dt {
			out = append(out, o)
		}
	}
	return out
}

func testUnary(t *testing.T, s *suite) {
	ls := layouts()
	for op := kernels.Neg; op.Valid(); op++ {
		for _, dt := range floats {
			for _, name := range sorted(ls) {
				for _, odt := range outTypes(dt) {
					x := input(dt, ls[name], s.uniform(unaryDomain(op)))
					dst := dense(odt, 4, 6)
					xs := x.bcast([]int{4, 6})
					want := make([]float64, len(xs))
					for i, v := range xs {
						want[i] = ref.Unary(op, v)
					}
					s.result(t, fmt.Sprintf("%v %v %s into %v", op, dt, name, odt), []*buf{dst, x}, 0, want, within(odt, unaryTol(op)),
						func(be kernels.Backend, o []kernels.Operand) { be.Unary(op, o[0], o[1]) })
				}
			}
			// A strided output, and in place.
			x := input(dt, kernels.Contiguous(4, 6), s.uniform(unaryDomain(op)))
			want := make([]float64, 24)
			for i, v := range x.vals() {
				want[i] = ref.Unary(op, v)
			}
			tw := make([]float64, 24) // the transposed output's row-major order
			for i := range 4 {
				for j := range 6 {
					tw[j*4+i] = want[i*6+j]
				}
			}
			s.result(t, fmt.Sprintf("%v %v into a transposed output", op, dt),
				[]*buf{out(dt, kernels.Layout{Shape: []int{6, 4}, Strides: []int{1, 6}}), x}, 0, tw, within(dt, unaryTol(op)),
				func(be kernels.Backend, o []kernels.Operand) {
					src := o[1] // x read as its transpose [6, 4]
					src.Layout = kernels.Layout{Shape: []int{6, 4}, Strides: []int{1, 6}}
					be.Unary(op, o[0], src)
				})
			s.result(t, fmt.Sprintf("%v %v in place", op, dt), []*buf{x}, 0, want, within(dt, unaryTol(op)),
				func(be kernels.Backend, o []kernels.Operand) { be.Unary(op, o[0], o[0]) })
		}
	}
	// No elements: nothing written, whatever the strides.
	s.result(t, "empty", []*buf{dense(dtype.F32, 3, 0), input(dtype.F32, kernels.Contiguous(3, 0), nil)}, 0, nil, exact,
		func(be kernels.Backend, o []kernels.Operand) { be.Unary(kernels.Exp, o[0], o[1]) })
}

func testUnaryBackward(t *testing.T, s *suite) {
	ls := layouts()
	for op := kernels.Neg; op.Valid(); op++ {
		for _, dt := range floats {
			for _, name := range []string{"contiguous", "transposed", "strided"} {
				x := input(dt, kernels.Contiguous(4, 6), s.uniform(unaryDomain(op)))
				xs := x.vals()
				g := input(dt, ls[name], s.uniform(-2, 2))
				gs := g.bcast([]int{4, 6})
				saved := x
				if op.SavesOutput() {
					saved = input(dt, kernels.Contiguous(4, 6), func(i int) float64 { return ref.Unary(op, xs[i]) })
				}
				ys := saved.vals()
				want := make([]float64, 24)
				for i := range want {
					// The derivative at the saved value the kernel reads: y rounded to dt.
					x, y := xs[i], ys[i]
					if op.SavesOutput() {
						x = math.NaN() // unused by these ops' derivatives
					}
					want[i] = ref.UnaryGrad(op, gs[i], x, y)
				}
				s.result(t, fmt.Sprintf("%v' %v g %s", op, dt, name), []*buf{dense(dt, 4, 6), g, saved}, 0, want, within(dt, 2*unaryTol(op)),
					func(be kernels.Backend, o []kernels.Operand) { be.UnaryBackward(op, o[0], o[1], o[2]) })
			}
		}
	}
}

// binaryDomain draws op's operands where it is defined and well conditioned.
func (s *suite) binaryDomain(op kernels.BinaryOp) (a, b func(int) float64) {
	switch op {
	case kernels.Pow:
		return s.uniform(0.5, 2), s.uniform(-2, 2)
	case kernels.Div:
		return s.uniform(-3, 3), func(int) float64 { return math.Copysign(0.5+1.5*s.r.Float64(), s.r.Float64()-0.5) }
	}
	return s.uniform(-3, 3), s.uniform(-3, 3)
}

// operand is an input of dt placed by ls[name] and drawn from v, or for "scalar" an
// immediate drawn from v.
func (s *suite) operand(dt dtype.DType, ls map[string]kernels.Layout, name string, v func(int) float64) *buf {
	if name == "scalar" {
		return imm(v(0))
	}
	return input(dt, ls[name], v)
}

// pairs are the (a, b) layouts binary cases run with; "scalar" is an immediate b.
var pairs = [][2]string{{"contiguous", "contiguous"}, {"contiguous", "row"}, {"transposed", "column"}, {"strided", "transposed"}, {"row", "column"}, {"strided", "scalar"}}

func testBinary(t *testing.T, s *suite) {
	ls := layouts()
	for op := kernels.Add; op.Valid(); op++ {
		for _, dt := range floats {
			for _, p := range pairs {
				ga, gb := s.binaryDomain(op)
				a, b := input(dt, ls[p[0]], ga), s.operand(dtype.F32, ls, p[1], gb)
				as, bs := a.bcast([]int{4, 6}), b.bcast([]int{4, 6})
				want := make([]float64, 24)
				for i := range want {
					want[i] = ref.Binary(op, as[i], bs[i])
				}
				s.result(t, fmt.Sprintf("%v %v %s·%s", op, dt, p[0], p[1]), []*buf{dense(dt, 4, 6), a, b}, 0, want, within(dt, binaryTol(op)),
					func(be kernels.Backend, o []kernels.Operand) { be.Binary(op, o[0], o[1], o[2]) })
			}
		}
	}
	// NaN propagates through Maximum and Minimum, either side.
	for _, op := range []kernels.BinaryOp{kernels.Maximum, kernels.Minimum} {
		for _, dt := range rowTypes {
			vals := []float64{math.NaN(), 1, -1, math.NaN(), math.Inf(1), 0}
			a := input(dt, kernels.Contiguous(6), func(i int) float64 { return vals[i] })
			b := input(dt, kernels.Contiguous(6), func(i int) float64 { return vals[5-i] })
			want := make([]float64, 6)
			av, bv := a.vals(), b.vals()
			for i := range want {
				if math.IsNaN(av[i]) || math.IsNaN(bv[i]) {
					want[i] = math.NaN()
				} else {
					want[i] = ref.Binary(op, av[i], bv[i])
				}
			}
			s.result(t, fmt.Sprintf("%v %v with NaN", op, dt), []*buf{dense(dt, 6), a, b}, 0, want, exact,
				func(be kernels.Backend, o []kernels.Operand) { be.Binary(op, o[0], o[1], o[2]) })
		}
	}
	testScalarReading(t, s)
}

// testScalarReading: a Scalar is read in float64 where the output is F64 and rounded to
// float32 otherwise, an F64 input beside it or not (kernels.Scalar's rule): a·0.1 and
// its gradient are then products rounded once to the output's type (a float32 one is
// exact in float64), which the references compute exactly.
func testScalarReading(t *testing.T, s *suite) {
	const v = 0.1 // no float32 holds it
	for _, dts := range [][2]dtype.DType{{dtype.F64, dtype.F64}, {dtype.F64, dtype.F32}, {dtype.F32, dtype.F32}, {dtype.F16, dtype.F64}} {
		out, in := dts[0], dts[1]
		read := v
		if out != dtype.F64 {
			read = float64(float32(v))
		}
		a := input(in, kernels.Contiguous(4, 6), s.uniform(-3, 3))
		want := make([]float64, 24)
		for i, x := range a.vals() {
			want[i] = toType(x*read, out) // x·read rounds once in float64 when in is F32
		}
		name := fmt.Sprintf("%v·Scalar(%v) into %v", in, v, out)
		s.result(t, name, []*buf{dense(out, 4, 6), a, exactImm(v)}, 0, want, exact,
			func(be kernels.Backend, o []kernels.Operand) { be.Binary(kernels.Mul, o[0], o[1], o[2]) })
		g := input(in, kernels.Contiguous(4, 6), s.uniform(-2, 2))
		for i, x := range g.vals() {
			want[i] = toType(x*read, out)
		}
		s.result(t, name+" backward", []*buf{dense(out, 4, 6), g, absent(), exactImm(v)}, 0, want, exact,
			func(be kernels.Backend, o []kernels.Operand) {
				be.BinaryBackward(kernels.Mul, kernels.ArgA, o[0], o[1], o[2], o[3])
			})
	}
}

func testBinaryBackward(t *testing.T, s *suite) {
	ls := layouts()
	for op := kernels.Add; op.Valid(); op++ {
		for _, wrt := range []kernels.Arg{kernels.ArgA, kernels.ArgB} {
			for _, dt := range floats {
				for _, p := range pairs[:4] {
					ga, gb := s.binaryDomain(op)
					a, b := input(dt, ls[p[0]], ga), input(dt, ls[p[1]], gb)
					g := input(dt, kernels.Contiguous(4, 6), s.uniform(-2, 2))
					as, bs, gs := a.bcast([]int{4, 6}), b.bcast([]int{4, 6}), g.vals()
					want := make([]float64, 24)
					for i := range want {
						want[i] = ref.BinaryGrad(op, wrt, gs[i], as[i], bs[i])
					}
					if op == kernels.Add || op == kernels.Sub {
						a, b = absent(), absent() // their derivatives read neither
					}
					s.result(t, fmt.Sprintf("%v'(%d) %v %s·%s", op, wrt, dt, p[0], p[1]), []*buf{dense(dt, 4, 6), g, a, b}, 0, want, within(dt, 8e-6),
						func(be kernels.Backend, o []kernels.Operand) { be.BinaryBackward(op, wrt, o[0], o[1], o[2], o[3]) })
				}
			}
		}
	}
	// A tie shares the gradient.
	for _, op := range []kernels.BinaryOp{kernels.Maximum, kernels.Minimum} {
		a := input(dtype.F32, kernels.Contiguous(3), func(i int) float64 { return float64(i) })
		b := input(dtype.F32, kernels.Contiguous(3), func(int) float64 { return 1 })
		g := input(dtype.F32, kernels.Contiguous(3), func(int) float64 { return 4 })
		want := []float64{ref.BinaryGrad(op, kernels.ArgA, 4, 0, 1), 2, ref.BinaryGrad(op, kernels.ArgA, 4, 2, 1)}
		s.result(t, fmt.Sprintf("%v' at a tie", op), []*buf{dense(dtype.F32, 3), g, a, b}, 0, want, exact,
			func(be kernels.Backend, o []kernels.Operand) {
				be.BinaryBackward(op, kernels.ArgA, o[0], o[1], o[2], o[3])
			})
	}
}

// testAxpy: alpha (0.1, which no float32 holds) is rounded to the type the kernel
// computes in: float32 unless dst or x is F64.
func testAxpy(t *testing.T, s *suite) {
	ls := layouts()
	const alpha = 0.1
	for _, dt := range floats {
		for _, xt := range []dtype.DType{dtype.F32, dtype.F64} {
			for _, name := range sorted(ls) {
				d := input(dt, kernels.Contiguous(4, 6), s.uniform(-2, 2))
				x := input(xt, ls[name], s.uniform(-2, 2))
				ds, xs := d.vals(), x.bcast([]int{4, 6})
				in64 := dt == dtype.F64 || xt == dtype.F64
				a := float64(float32(alpha))
				if in64 {
					a = alpha
				}
				want := make([]float64, 24)
				for i := range want {
					// One rounding of the product, one of the sum, as the kernel.
					want[i] = ds[i] + dtRound(in64, a*xs[i])
				}
				s.result(t, fmt.Sprintf("%v += %v %s", dt, xt, name), []*buf{d, x}, 0, want, within(dt, 1e-7),
					func(be kernels.Backend, o []kernels.Operand) { be.Axpy(o[0], alpha, o[1]) })
			}
		}
	}
}

// dtRound is v rounded to the compute type: float64 when in64, else float32.
func dtRound(in64 bool, v float64) float64 {
	if in64 {
		return v
	}
	return float64(float32(v))
}

// addcTriples are the (x, a, b) layouts Addc cases run with: x broadcast too.
var addcTriples = [][3]string{
	{"contiguous", "contiguous", "contiguous"}, {"transposed", "row", "column"}, {"strided", "scalar", "transposed"},
	{"row", "column", "strided"}, {"column", "strided", "scalar"},
}

func testAddc(t *testing.T, s *suite) {
	ls := layouts()
	shape := []int{4, 6}
	for _, op := range []kernels.BinaryOp{kernels.Mul, kernels.Div} {
		_, gb := s.binaryDomain(op) // b away from 0 for Div
		for _, dt := range floats {
			for _, tr := range addcTriples {
				for _, value := range []float64{0.5, -1.5} {
					x, a, b := s.operand(dt, ls, tr[0], s.uniform(-2, 2)), s.operand(dtype.F32, ls, tr[1], s.uniform(-2, 2)), s.operand(dt, ls, tr[2], gb)
					xs, as, bs := x.bcast(shape), a.bcast(shape), b.bcast(shape)
					want := make([]float64, len(xs))
					for i := range want {
						want[i] = refAddc(op, xs[i], as[i], bs[i], value)
					}
					s.result(t, fmt.Sprintf("addc%v %v %s·%s·%s value %v", op, dt, tr[0], tr[1], tr[2], value), []*buf{dense(dt, 4, 6), x, a, b}, 0, want, within(dt, 2e-6),
						func(be kernels.Backend, o []kernels.Operand) { be.Addc(op, o[0], o[1], o[2], o[3], value) })
				}
			}
			// In place (dst is x), and a transposed output.
			x, a, b := input(dt, kernels.Contiguous(4, 6), s.uniform(-2, 2)), input(dt, ls["strided"], s.uniform(-2, 2)), input(dtype.F32, ls["row"], gb)
			xs, as, bs := x.vals(), a.bcast(shape), b.bcast(shape)
			want := make([]float64, len(xs))
			for i := range want {
				want[i] = refAddc(op, xs[i], as[i], bs[i], 0.1)
			}
			f := func(be kernels.Backend, o []kernels.Operand) { be.Addc(op, o[0], o[1], o[2], o[3], 0.1) }
			s.result(t, fmt.Sprintf("addc%v %v in place", op, dt), []*buf{x, a, b}, 0, want, within(dt, 2e-6),
				func(be kernels.Backend, o []kernels.Operand) { f(be, []kernels.Operand{o[0], o[0], o[1], o[2]}) })
			s.result(t, fmt.Sprintf("addc%v %v into a transposed output", op, dt), []*buf{out(dt, ls["transposed"]), x, a, b}, 0, want, within(dt, 2e-6), f)
		}
	}
	s.result(t, "empty", []*buf{dense(dtype.F32, 3, 0), input(dtype.F32, kernels.Contiguous(3, 0), nil), imm(1), imm(2)}, 0, nil, exact,
		func(be kernels.Backend, o []kernels.Operand) { be.Addc(kernels.Mul, o[0], o[1], o[2], o[3], 1) })
}

func testDropout(t *testing.T, s *suite) {
	for _, n := range []int{0, 5, 1000} {
		for _, p := range []float64{0, 0.3, 1} {
			for _, seed := range []uint64{0, 0x1234_5678_9abc_def0} {
				thr := uint64(math.Ldexp(float64(float32(p)), 32)) // p rounded to float32, kernels/cpu's rule
				want := make([]float64, n)
				for i := range want {
					w := philox([4]uint32{uint32(i / 4), uint32(uint64(i/4) >> 32)}, [2]uint32{uint32(seed), uint32(seed >> 32)})
					if uint64(w[i%4]) >= thr {
						want[i] = 1
					}
				}
				s.result(t, fmt.Sprintf("mask n=%d p=%v seed=%#x", n, p, seed), []*buf{dense(dtype.Bool, n)}, 0, want, exact,
					func(be kernels.Backend, o []kernels.Operand) { be.DropoutMask(o[0], p, seed) })
			}
		}
	}
	// The known answer of Random123 for the zero key: words 0x6627e8d5, 0xe169c58d,
	// 0xbc57ac4c, 0x9b00dbd8 at counter 0.
	if philox([4]uint32{}, [2]uint32{}) != [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8} {
		t.Fatal("the suite's Philox is not Random123's")
	}
	for _, dt := range floats {
		const p = 0.1 // no float32 holds it: the scale is 1/(1-p) in the compute type
		x := input(dt, kernels.Layout{Shape: []int{4, 6}, Strides: []int{1, 4}}, s.uniform(-2, 2))
		m := input(dtype.Bool, kernels.Contiguous(4, 6), func(int) float64 { return float64(s.r.IntN(2)) })
		xs, ms := x.bcast([]int{4, 6}), m.vals()
		scale := float64(1 / (1 - float32(p)))
		if dt == dtype.F64 {
			scale = 1 / (1 - p)
		}
		want := make([]float64, 24)
		for i := range want {
			want[i] = xs[i] * ms[i] * scale
		}
		s.result(t, fmt.Sprintf("apply %v", dt), []*buf{dense(dt, 4, 6), x, m}, 0, want, within(dt, 1e-7),
			func(be kernels.Backend, o []kernels.Operand) { be.Dropout(o[0], o[1], o[2], p) })
	}
}

// testDenseF32 checks kernels.DenseF32 where the backend has it: UnaryF32 and BinaryF32
// over host slices give the float64 references' values within testUnary's and
// testBinary's tolerances, and the bits Unary and Binary give over the same values as
// operands (kernels/cpu computes both with one function; another backend need not),
// for every op, at a length one goroutine computes and at one the backend may spread.
func testDenseF32(t *testing.T, s *suite) {
	d, ok := s.tg.Backend.(kernels.DenseF32)
	if !ok {
		t.Skip("the backend takes no host slices")
	}
	for _, n := range []int{7, 1 << 16} {
		for op := kernels.Neg; op.Valid(); op++ {
			x := row(dtype.F32, n, s.uniform(unaryDomain(op)))
			got := make([]float32, n)
			d.UnaryF32(op, got, float32s(x))
			what := fmt.Sprintf("%v over %d elements", op, n)
			want := make([]float64, n)
			for i, v := range x.vals() {
				want[i] = ref.Unary(op, v)
			}
			near(t, what, want, x.values(f32Bytes(got)), within(dtype.F32, unaryTol(op)))
			bits := exec(t, s.tg, []*buf{dense(dtype.F32, n), x}, func(be kernels.Backend, o []kernels.Operand) { be.Unary(op, o[0], o[1]) })[0]
			require.Equal(t, bits, f32Bytes(got), "%s: against Unary", what)
		}
		for op := kernels.Add; op.Valid(); op++ {
			ga, gb := s.binaryDomain(op)
			a, b := row(dtype.F32, n, ga), row(dtype.F32, n, gb)
			got := make([]float32, n)
			d.BinaryF32(op, got, float32s(a), float32s(b))
			what := fmt.Sprintf("%v over %d elements", op, n)
			as, bs := a.vals(), b.vals()
			want := make([]float64, n)
			for i := range want {
				want[i] = ref.Binary(op, as[i], bs[i])
			}
			near(t, what, want, a.values(f32Bytes(got)), within(dtype.F32, binaryTol(op)))
			bits := exec(t, s.tg, []*buf{dense(dtype.F32, n), a, b}, func(be kernels.Backend, o []kernels.Operand) { be.Binary(op, o[0], o[1], o[2]) })[0]
			require.Equal(t, bits, f32Bytes(got), "%s: against Binary", what)
		}
	}
}

// float32s is the values of a float32 buffer.
func float32s(b *buf) []float32 {
	v := b.vals()
	s := make([]float32, len(v))
	for i, x := range v {
		s[i] = float32(x)
	}
	return s
}

// f32Bytes is s's bytes, as a block of float32 holds them (a dense F32 buf's values
// reads them back).
func f32Bytes(s []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s))
}
