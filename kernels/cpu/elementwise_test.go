package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/kernelstest/ref"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
)

var unaryOps = []kernels.UnaryOp{kernels.Neg, kernels.Abs, kernels.Exp, kernels.Log, kernels.Sqrt, kernels.Tanh, kernels.Sigmoid, kernels.Relu, kernels.GeluTanh, kernels.GeluErf}

func domain(op kernels.UnaryOp, r *rand.Rand) func() float64 {
	if op == kernels.Log || op == kernels.Sqrt {
		return func() float64 { return 0.05 + 4*r.Float64() }
	}
	return func() float64 { return 6*r.Float64() - 3 }
}

func TestUnaryAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 11))
	for trial := range 300 {
		op := unaryOps[trial%len(unaryOps)]
		shape := randShape(r, r.IntN(5), 7)
		xt, dt := pick(r, floatTypes), pick(r, floatTypes)
		x := randView(r, xt, shape, domain(op, r))
		if r.IntN(4) == 0 {
			x = randView(r, xt, broadcastShape(r, shape), domain(op, r))
		}
		dst := randView(r, dt, shape, func() float64 { return 99 })
		Unary(op, dst.op(), x.op())
		forEachIndex(shape, func(idx []int) {
			want := roundTo(dt, ref.Unary(op, x.get(idx)))
			requireClose(t, dt, want, dst.get(idx), "%v %v->%v at %v", op, xt, dt, idx)
		})

		// backward: g·op'(x), with the saved tensor op asks for
		g := randView(r, pick(r, floatTypes), shape, func() float64 { return 2*r.Float64() - 1 })
		saved := x
		if op.SavesOutput() {
			saved = contiguousView(wider(dtype.F32, dt), shape, func() float64 { return 0 })
			Unary(op, saved.op(), x.op())
		}
		dx := randView(r, dt, shape, func() float64 { return 99 })
		UnaryBackward(op, dx.op(), g.op(), saved.op())
		forEachIndex(shape, func(idx []int) {
			xv := x.get(idx)
			y := ref.Unary(op, xv)
			if op.SavesOutput() { // the kernel sees y rounded to the saved tensor's type
				y = saved.get(idx)
			}
			want := ref.UnaryGrad(op, g.get(idx), xv, y)
			requireClose(t, dt, roundTo(dt, want), dx.get(idx), "%v backward %v at %v (x=%v)", op, dt, idx, xv)
		})
	}
}

func TestUnaryEdges(t *testing.T) {
	in := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), -100, 100}
	out := make([]float32, len(in))
	l := kernels.Contiguous(len(in))
	Unary(kernels.Sigmoid, F32(out, l), F32(in, l))
	assert.Equal(t, []float32{0.5, 0.5, 1, 0}, out[:4])
	assert.True(t, math.IsNaN(float64(out[4])))
	assert.Equal(t, float32(0), out[5], "sigmoid(-100) underflows to 0, not NaN")
	assert.Equal(t, float32(1), out[6])
	Unary(kernels.Relu, F32(out, l), F32(in, l))
	assert.Equal(t, float32(math.Inf(1)), out[2])
	assert.True(t, math.IsNaN(float64(out[4])), "relu keeps NaN")
	Unary(kernels.GeluTanh, F32(out, l), F32(in, l))
	assert.Equal(t, []float32{0, 0}, out[:2])
	assert.Equal(t, []bool{false, true}, []bool{math.Signbit(float64(out[0])), math.Signbit(float64(out[1]))}, "gelu keeps the sign of zero")
	assert.True(t, out[5] == 0 && math.Signbit(float64(out[5])), "gelu(-100) is -0, as x/2·(1+tanh u) = -50·0: %v", out[5])
	assert.Equal(t, float32(100), out[6])
}

func TestUnaryInPlaceAndLarge(t *testing.T) {
	// Large enough to run on several goroutines; in place (dst is x).
	n := 3*grain + 17
	x := make([]float32, n)
	want := make([]float32, n)
	for i := range x {
		x[i] = float32(i%1000) / 100
		want[i] = float32(math.Tanh(float64(x[i])))
	}
	l := kernels.Contiguous(n)
	Unary(kernels.Tanh, F32(x, l), F32(x, l))
	for i := range x {
		require.InDelta(t, want[i], x[i], 2e-6, "at %d", i)
	}
}

var binaryOps = []kernels.BinaryOp{kernels.Add, kernels.Sub, kernels.Mul, kernels.Div, kernels.Pow, kernels.Maximum, kernels.Minimum}

func TestBinaryAgainstReference(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 13))
	for trial := range 400 {
		op := binaryOps[trial%len(binaryOps)]
		shape := randShape(r, r.IntN(5), 6)
		at, bt, dt := pick(r, floatTypes), pick(r, floatTypes), pick(r, floatTypes)
		gen := func() float64 {
			if op == kernels.Pow {
				return 0.2 + 2*r.Float64()
			}
			if op == kernels.Maximum || op == kernels.Minimum {
				return float64(r.IntN(3)) // ties happen
			}
			return 4*r.Float64() - 2
		}
		genB := gen
		if op == kernels.Div {
			genB = func() float64 { return 0.5 + r.Float64() }
		}
		aShape, bShape := shape, shape
		switch r.IntN(3) {
		case 0:
			aShape = broadcastShape(r, shape)
		case 1:
			bShape = broadcastShape(r, shape)
		}
		a := randView(r, at, aShape, gen)
		b := randView(r, bt, bShape, genB)
		if r.IntN(5) == 0 { // a scalar operand: a rank-0 layout
			b = contiguousView(bt, nil, genB)
		}
		dst := randView(r, dt, shape, func() float64 { return 99 })
		Binary(op, dst.op(), a.op(), b.op())
		forEachIndex(shape, func(idx []int) {
			want := roundTo(dt, ref.Binary(op, a.get(idx), b.get(idx)))
			requireClose(t, dt, want, dst.get(idx), "%v %v,%v->%v at %v", op, at, bt, dt, idx)
		})
		g := randView(r, pick(r, floatTypes), shape, func() float64 { return 2*r.Float64() - 1 })
		for _, wrt := range []kernels.Arg{kernels.ArgA, kernels.ArgB} {
			d := randView(r, dt, shape, func() float64 { return 99 })
			BinaryBackward(op, wrt, d.op(), g.op(), a.op(), b.op())
			forEachIndex(shape, func(idx []int) {
				want := roundTo(dt, ref.BinaryGrad(op, wrt, g.get(idx), a.get(idx), b.get(idx)))
				requireClose(t, dt, want, d.get(idx), "%v backward %d at %v", op, wrt, idx)
			})
		}
	}
}

func TestBinaryInPlaceBroadcast(t *testing.T) {
	// x += bias over rows, in place, bias broadcast from shape [n].
	rows, n := 5, 7
	x := make([]float32, rows*n)
	bias := make([]float32, n)
	for i := range x {
		x[i] = float32(i)
	}
	for j := range bias {
		bias[j] = float32(100 * j)
	}
	l := kernels.Contiguous(rows, n)
	Binary(kernels.Add, F32(x, l), F32(x, l), F32(bias, kernels.Contiguous(n)))
	for i := range x {
		assert.Equal(t, float32(i+100*(i%n)), x[i])
	}
}

func TestPowBackwardZeros(t *testing.T) {
	a := []float32{0, 0, 2}
	b := []float32{0, 2, 0}
	g := []float32{1, 1, 1}
	d := make([]float32, 3)
	l := kernels.Contiguous(3)
	BinaryBackward(kernels.Pow, kernels.ArgA, F32(d, l), F32(g, l), F32(a, l), F32(b, l))
	assert.Equal(t, []float32{0, 0, 0}, d, "d/da a^0 is 0 everywhere; d/da a^2 at 0 is 0")
	BinaryBackward(kernels.Pow, kernels.ArgB, F32(d, l), F32(g, l), F32(a, l), F32(b, l))
	assert.Equal(t, float32(0), d[0], "d/db 0^b is 0 for b >= 0, not NaN")
	assert.Equal(t, float32(0), d[1])
	assert.InDelta(t, math.Log(2), d[2], 1e-6)
}

func TestMaximumNaNAndInf(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	a := []float32{inf, nan, 1}
	b := []float32{inf, 1, nan}
	g := []float32{1, 1, 1}
	d := make([]float32, 3)
	l := kernels.Contiguous(3)
	Binary(kernels.Maximum, F32(d, l), F32(a, l), F32(b, l))
	assert.Equal(t, inf, d[0])
	assert.True(t, math.IsNaN(float64(d[1])) && math.IsNaN(float64(d[2])), "maximum propagates NaN: %v", d)
	BinaryBackward(kernels.Maximum, kernels.ArgA, F32(d, l), F32(g, l), F32(a, l), F32(b, l))
	assert.Equal(t, float32(0.5), d[0], "equal infinities are a tie")
	assert.True(t, math.IsNaN(float64(d[1])) && math.IsNaN(float64(d[2])))
}

func TestBroadcastMismatchPanics(t *testing.T) {
	a := make([]float32, 6)
	b := make([]float32, 4)
	assert.PanicsWithValue(t,
		"kernels/cpu: add: input 1 of shape [4] does not broadcast to [2 3]",
		func() {
			Binary(kernels.Add, F32(a, kernels.Contiguous(2, 3)), F32(a, kernels.Contiguous(2, 3)), F32(b, kernels.Contiguous(4)))
		})
	assert.Panics(t, func() { F32(a, kernels.Contiguous(7)) }, "layout past the buffer")
	assert.Panics(t, func() {
		Unary(kernels.Exp, I32(make([]int32, 6), kernels.Contiguous(6)), F32(a, kernels.Contiguous(6)))
	}, "int output")
	expanded := kernels.Layout{Shape: []int{2, 3}, Strides: []int{0, 1}}
	assert.PanicsWithValue(t,
		"kernels/cpu: exp: output (shape [2 3] strides [0 1] offset 0) repeats elements along dimension 0; write to a tensor that owns its elements",
		func() { Unary(kernels.Exp, F32(a, expanded), F32(a, kernels.Contiguous(2, 3))) })
	assert.Panics(t, func() { Copy(F32(a, expanded), F32(a, kernels.Contiguous(2, 3))) })
	assert.Panics(t, func() { Fill(F32(a, expanded), 1) })
}

// Relu's gradient is g where its output is NaN, as PyTorch's threshold_backward gives
// (where(y <= 0, 0, g)): the NaN is not hidden from a found-inf check.
// A NaN g where y <= 0 gives 0 (a where, not a product), and 0 is +0.
func TestReluBackwardAtNaN(t *testing.T) {
	nan, negZero := math.NaN(), math.Copysign(0, -1)
	y := []float64{nan, 0, negZero, -1, 2, math.Inf(1)}
	g := []float64{3, nan, -3, nan, 3, -3}
	want := []float64{3, 0, 0, 0, 3, -3}
	l := kernels.Contiguous(len(y))
	y32, g32 := make([]float32, len(y)), make([]float32, len(g))
	for i := range y {
		y32[i], g32[i] = float32(y[i]), float32(g[i])
	}
	dx := make([]float32, len(y))
	UnaryBackward(kernels.Relu, F32(dx, l), F32(g32, l), F32(y32, l))
	dx64 := make([]float64, len(y))
	UnaryBackward(kernels.Relu, F64(dx64, l), F64(g, l), F64(y, l))
	for i, w := range want {
		assert.Equal(t, math.Float32bits(float32(w)), math.Float32bits(dx[i]), "float32 at %d", i)
		assert.Equal(t, math.Float64bits(w), math.Float64bits(dx64[i]), "float64 at %d", i)
	}
}

// TestDenseF32MatchesOperands: UnaryF32 and BinaryF32 give the bits the operand path
// (the package's Unary and Binary) gives, for every op, at lengths that run inline and
// on several goroutines, on values that include zeros of both signs, infinities and
// NaN; slices of different lengths panic.
func TestDenseF32MatchesOperands(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 15))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e30, -1e-30}
	fill := func(n int, lo, span float64) []float32 {
		s := make([]float32, n)
		for i := range s {
			if r.IntN(8) == 0 {
				s[i] = special[r.IntN(len(special))]
			} else {
				s[i] = float32(lo + span*r.Float64())
			}
		}
		return s
	}
	same := func(t *testing.T, want, got []float32, what string) {
		t.Helper()
		for i := range want {
			w, g := want[i], got[i]
			if math.Float32bits(w) != math.Float32bits(g) && !(w != w && g != g) {
				t.Fatalf("%s at %d: operands give %v (%#x), slices %v (%#x)", what, i, w, math.Float32bits(w), g, math.Float32bits(g))
			}
		}
	}
	var be Backend
	for _, n := range []int{0, 1, 7, 1000, 3*grain + 17} {
		l := kernels.Contiguous(n)
		for _, op := range unaryOps {
			x := fill(n, -3, 6)
			want, got := make([]float32, n), make([]float32, n)
			Unary(op, F32(want, l), F32(x, l))
			be.UnaryF32(op, got, x)
			same(t, want, got, op.String())
		}
		for _, op := range binaryOps {
			a, b := fill(n, -2, 4), fill(n, 0.5, 2)
			want, got := make([]float32, n), make([]float32, n)
			Binary(op, F32(want, l), F32(a, l), F32(b, l))
			be.BinaryF32(op, got, a, b)
			same(t, want, got, op.String())
		}
	}
	require.Panics(t, func() { be.BinaryF32(kernels.Add, make([]float32, 3), make([]float32, 3), make([]float32, 2)) })
	require.Panics(t, func() { be.UnaryF32(kernels.Neg, make([]float32, 3), make([]float32, 4)) })
}
