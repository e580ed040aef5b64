package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/kernels"
)

// The vector loops against the scalar operations they stand for, bit for bit, over
// lengths around their vector and block sizes (on a CPU without them the Go loops run
// both sides).

func bitsOf[T float](x T) uint64 {
	if is32[T]() {
		return uint64(math.Float32bits(float32(x)))
	}
	return math.Float64bits(float64(x))
}

func testBinaryVector[T float](t *testing.T) {
	r := rand.New(rand.NewPCG(40, 41))
	ops := map[kernels.BinaryOp]func(x, y T) T{
		kernels.Add: func(x, y T) T { return x + y }, kernels.Sub: func(x, y T) T { return x - y },
		kernels.Mul: func(x, y T) T { return x * y }, kernels.Div: func(x, y T) T { return x / y },
	}
	for op, f := range ops {
		for n := range 80 {
			a, b := randFloats[T](r, n, 1e3), randFloats[T](r, n, 1e3)
			dst := make([]T, n)
			binaryRun(op, dst, a, b)
			for i := range n {
				require.Equal(t, bitsOf(f(a[i], b[i])), bitsOf(dst[i]), "%v n=%d at %d", op, n, i)
			}
			want := append([]T(nil), dst...)
			binaryRun(op, a, a, b) // in place
			for i := range n {
				require.Equal(t, bitsOf(want[i]), bitsOf(a[i]), "%v in place n=%d at %d", op, n, i)
			}
		}
	}
}

func TestBinaryVector(t *testing.T) {
	bothTypes(t, testBinaryVector[float32], testBinaryVector[float64])
}

// testLanes checks a sixteen-lane sum against its definition: acc[i%16] += x[i], or
// the square x[i]·x[i] rounded to T (square).
func testLanes[T float](t *testing.T, square bool) {
	r := rand.New(rand.NewPCG(42, 43))
	for n := range 100 {
		x := randFloats[T](r, n, 1e3)
		var got, want [16]float64
		for i := range want {
			v := r.NormFloat64()
			got[i], want[i] = v, v
		}
		if square {
			sumSquaresLanes(&got, x)
		} else {
			sumLanes(&got, x)
		}
		for i, v := range x {
			if square {
				v *= v // rounded to T
			}
			want[i%16] += float64(v)
		}
		require.Equal(t, want, got, "n=%d square=%v", n, square)
	}
}

func TestSumLanes(t *testing.T) {
	bothTypes(t, func(t *testing.T) { testLanes[float32](t, false) }, func(t *testing.T) { testLanes[float64](t, false) })
}

func TestSumSquaresLanes(t *testing.T) {
	bothTypes(t, func(t *testing.T) { testLanes[float32](t, true) }, func(t *testing.T) { testLanes[float64](t, true) })
}

// testSumRows checks sumRows against sumLanes then combineLanes, row by row, over
// row lengths around 16 and counts of rows odd and even.
func testSumRows[T float](t *testing.T) {
	r := rand.New(rand.NewPCG(52, 53))
	for trial := range 200 {
		rows, n := r.IntN(6), 16*r.IntN(5)
		if trial%4 == 0 {
			n = r.IntN(70)
		}
		ld := n + r.IntN(20)
		square := trial%2 == 1
		x := randFloats[T](r, rows*ld+n, 1e3)
		got := make([]float64, rows)
		sumRows(got, x, ld, n, square)
		for i := range rows {
			var lanes [16]float64
			for k, v := range x[i*ld : i*ld+n] {
				if square {
					v *= v // rounded to T
				}
				lanes[k%16] += float64(v)
			}
			require.Equal(t, combineLanes(&lanes), got[i], "row %d of %d, n=%d ld=%d square=%v", i, rows, n, ld, square)
		}
	}
}

func TestSumRows(t *testing.T) { bothTypes(t, testSumRows[float32], testSumRows[float64]) }

func testNarrow[T float](t *testing.T) {
	r := rand.New(rand.NewPCG(54, 55))
	for n := range 70 {
		src := randFloats[float64](r, n, 1e30)
		if n > 3 {
			src[1], src[2], src[3] = math.NaN(), math.Inf(-1), math.Copysign(0, -1)
		}
		dst := make([]T, n)
		narrow(dst, src)
		for i, v := range src {
			require.Equal(t, bitsOf(T(v)), bitsOf(dst[i]), "n=%d at %d", n, i)
		}
	}
}

func TestNarrow(t *testing.T) { bothTypes(t, testNarrow[float32], testNarrow[float64]) }

func testAddRows[T float](t *testing.T) {
	r := rand.New(rand.NewPCG(44, 45))
	for range 60 {
		cols, rows := r.IntN(70), r.IntN(20)
		ld := cols + r.IntN(5)
		x := randFloats[T](r, rows*ld, 1e3)
		got, want := make([]float64, cols), make([]float64, cols)
		for j := range got {
			v := r.NormFloat64()
			got[j], want[j] = v, v
		}
		addRows(got, x, ld, rows)
		for j := range want {
			for i := range rows {
				want[j] += float64(x[i*ld+j])
			}
		}
		require.Equal(t, want, got, "%d rows of %d (ld %d)", rows, cols, ld)
	}
}

func TestAddRows(t *testing.T) { bothTypes(t, testAddRows[float32], testAddRows[float64]) }

// maxData is data with ties, zeros of both signs, infinities and, with nan set, a few
// NaNs; one in eight is all -Inf but for its NaNs.
func maxData[T float](r *rand.Rand, n int, nan bool) []T {
	x := make([]T, n)
	low := r.IntN(8) == 0
	for i := range x {
		x[i] = T(r.IntN(9) - 4)
		switch {
		case low || r.IntN(60) == 0:
			x[i] = T(math.Inf(-1))
		case r.IntN(30) == 0:
			x[i] = T(math.Copysign(0, -1))
		case r.IntN(200) == 0:
			x[i] = T(math.Inf(1))
		}
		if nan && r.IntN(50) == 0 {
			x[i] = T(math.NaN())
		}
	}
	return x
}

// testMaxRuns folds a few runs of each of several outputs (rows ld apart) with
// maxRuns and with the scalar scan, addMax, into outputs of their own.
func testMaxRuns[T float](t *testing.T) {
	r := rand.New(rand.NewPCG(46, 47))
	for trial := range 300 {
		n := 1 + r.IntN(5)
		f := getFold[T](true)
		f.reset(2 * n)
		pos := 0
		for range 1 + r.IntN(3) { // runs of each output, in order
			m := r.IntN(150)
			ld := m + r.IntN(9)
			x := maxData[T](r, n*ld, trial%3 == 0)
			f.maxRuns(0, n, x, ld, m, pos)
			for j := range n {
				f.addMax(n+j, x[j*ld:j*ld+m], pos) // the scalar scan, for reference
			}
			pos += m + r.IntN(3)
		}
		for j := range n {
			require.Equal(t, f.arg[n+j], f.arg[j], "trial %d output %d", trial, j)
			require.Equal(t, bitsOf(f.max[n+j]), bitsOf(f.max[j]), "trial %d output %d", trial, j)
		}
		putFold(f)
	}
}

func TestMaxRuns(t *testing.T) { bothTypes(t, testMaxRuns[float32], testMaxRuns[float64]) }

func testMaxRows[T float](t *testing.T) {
	r := rand.New(rand.NewPCG(48, 49))
	for trial := range 200 {
		n, rows := 1+r.IntN(70), 1+r.IntN(12)
		ld := n + r.IntN(4)
		x := maxData[T](r, rows*ld, trial%2 == 0)
		f, ref := getFold[T](true), getFold[T](true)
		f.reset(n)
		ref.reset(n)
		at := r.IntN(5)
		f.maxRows(n, x, ld, rows, at)
		for e := range rows {
			ref.addColumn(0, x[e*ld:e*ld+n], at+e)
		}
		require.Equal(t, ref.arg[:n], f.arg[:n], "trial %d", trial)
		for j := range n {
			require.Equal(t, bitsOf(ref.max[j]), bitsOf(f.max[j]), "trial %d column %d", trial, j)
		}
		putFold(f)
		putFold(ref)
	}
}

func TestMaxRows(t *testing.T) { bothTypes(t, testMaxRows[float32], testMaxRows[float64]) }

// reluData is data with zeros of both signs, NaNs and infinities among normal values.
func reluData[T float](r *rand.Rand, n int) []T {
	x := randFloats[T](r, n, 1)
	special := []float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1)}
	for i := range x {
		if r.IntN(5) == 0 {
			x[i] = T(special[r.IntN(len(special))])
		}
	}
	return x
}

func testReluVector[T float](t *testing.T) {
	r := rand.New(rand.NewPCG(50, 51))
	same := func(want, got T) bool { return bitsOf(want) == bitsOf(got) || want != want && got != got }
	for n := range 80 {
		x, g := reluData[T](r, n), reluData[T](r, n)
		dst := make([]T, n)
		unaryRun(kernels.Relu, dst, x)
		for i, v := range x {
			require.True(t, same(max(v, 0), dst[i]), "relu(%v) = %v, n=%d", v, dst[i], n)
		}
		reluGradRun(dst, g, x)
		for i := range x {
			want := g[i]
			if x[i] <= 0 {
				want = 0 // all bits clear
			}
			require.Equal(t, bitsOf(want), bitsOf(dst[i]), "relu grad of %v at y=%v, n=%d", g[i], x[i], n)
		}
	}
}

func TestReluVector(t *testing.T) { bothTypes(t, testReluVector[float32], testReluVector[float64]) }
