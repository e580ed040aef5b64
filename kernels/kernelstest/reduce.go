package kernelstest

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// refReduce sums (or averages) src's values over the dimensions dst reduces (dst's
// shape broadcast to src's), in float64, and returns the results in dst's row-major
// order with the sum of magnitudes of each (for the tolerance).
func refReduce(src *buf, dstShape []int, mean bool) (want, mag []float64) {
	shape := src.l.Shape
	xs := src.vals()
	nOut := numel(dstShape)
	want, mag = make([]float64, nOut), make([]float64, nOut)
	count := make([]int, nOut)
	d := len(shape) - len(dstShape)
	for i, v := range xs {
		// The output element of input element i: its coordinates on dst's dimensions
		// (0 where dst has size 1).
		o, rem, stride := 0, i, 1
		for j := len(shape) - 1; j >= 0; j-- {
			x := rem % shape[j]
			rem /= shape[j]
			if j >= d && dstShape[j-d] != 1 {
				o += x * stride
				stride *= dstShape[j-d]
			}
		}
		want[o] += v
		mag[o] += math.Abs(v)
		count[o]++
	}
	for o := range want {
		if mean {
			want[o] /= float64(count[o])
			mag[o] /= float64(count[o])
			if count[o] == 0 {
				want[o] = math.NaN()
			}
		}
	}
	return want, mag
}

func testReduce(t *testing.T, s *suite) {
	cases := []struct {
		src, dst []int
		srcL     *kernels.Layout
	}{
		{[]int{4, 6}, []int{1, 6}, nil},
		{[]int{4, 6}, []int{4, 1}, nil},
		{[]int{4, 6}, []int{6}, nil},
		{[]int{4, 6}, nil, nil},
		{[]int{2, 3, 4}, []int{2, 1, 4}, &kernels.Layout{Shape: []int{2, 3, 4}, Strides: []int{1, 8, 2}, Offset: 3}},
		{[]int{3, 70000}, []int{3, 1}, nil},   // pieces of a block
		{[]int{70000, 40}, []int{1, 40}, nil}, // pieces of threads; on cuda, of column blocks
		// Column sums (cuda's reduce_cols): one piece; two pieces and a column group
		// half full; rows apart by more than their length; and an input off its
		// 16-byte word, which takes the thread-per-output kernel instead.
		{[]int{6, 8}, []int{1, 8}, nil},
		{[]int{256, 36}, []int{36}, nil},
		{[]int{5, 8}, []int{1, 8}, &kernels.Layout{Shape: []int{5, 8}, Strides: []int{12, 1}}},
		{[]int{8, 8}, []int{1, 8}, &kernels.Layout{Shape: []int{8, 8}, Strides: []int{8, 1}, Offset: 2}},
		// Rows of a few hundred elements (cuda's reduce_warp): dense, each row on
		// another 16-byte phase (a head and a tail around the words); and strided.
		{[]int{30, 300}, []int{30, 1}, &kernels.Layout{Shape: []int{30, 300}, Strides: []int{301, 1}, Offset: 1}},
		{[]int{6, 100}, []int{6, 1}, &kernels.Layout{Shape: []int{6, 100}, Strides: []int{200, 2}}},
		{[]int{4, 0}, []int{4, 1}, nil}, // empty reductions: 0, and NaN means
		{[]int{0, 6}, []int{0, 1}, nil}, // no outputs
	}
	// (input, output) types: float32 sums of each kind of input, float64 ones of F64
	// and of integers (exact in float64), and an F64 sum rounded to F32.
	types := [][2]dtype.DType{{dtype.F32, dtype.F32}, {dtype.BF16, dtype.F16}, {dtype.I32, dtype.F32},
		{dtype.F64, dtype.F64}, {dtype.I32, dtype.F64}, {dtype.F64, dtype.F32}}
	for _, c := range cases {
		for _, ty := range types {
			dt, odt := ty[0], ty[1]
			for _, kind := range []string{"sum", "mean", "sum of squares"} {
				mean := kind == "mean"
				if numel(c.src) > 10000 && (kind != "sum" || dt != odt || dt == dtype.BF16) {
					continue // the pieces are the same for every type: one run for each compute type
				}
				l := kernels.Contiguous(c.src...)
				if c.srcL != nil {
					l = *c.srcL
				}
				src := input(dt, l, s.uniform(-4, 4))
				ref := src
				if kind == "sum of squares" { // the squares exact in float64, each within the tolerance's rounding
					vals := src.vals()
					ref = input(dtype.F64, kernels.Contiguous(c.src...), func(i int) float64 { return vals[i] * vals[i] })
				}
				want, mag := refReduce(ref, c.dst, mean)
				tl := within(odt, 1e-6)
				if odt == dtype.F64 {
					// Any order of n float64 additions is off by at most (n-1)·2⁻⁵³ of
					// the sum of magnitudes, the reference's and the kernel's alike.
					n := numel(c.src) / max(numel(c.dst), 1)
					tl = tol{rel: float64(max(n-1, 1)) * 0x1p-52}
				}
				for _, m := range mag {
					if !math.IsNaN(m) {
						tl.abs = max(tl.abs, tl.rel*m)
					}
				}
				name := fmt.Sprintf("%v %v → %v %v %s", dt, c.src, odt, c.dst, kind)
				f := func(be kernels.Backend, o []kernels.Operand) {
					switch kind {
					case "mean":
						be.Mean(o[0], o[1])
					case "sum":
						be.Sum(o[0], o[1])
					default:
						be.SumSquares(o[0], o[1])
					}
				}
				bufs := []*buf{dense(odt, c.dst...), src}
				first := s.result(t, name, bufs, 0, want, tl, f)
				again := exec(t, s.tg, bufs, f)
				requireSameBits(t, name+": run again", first, bufs[0].values(again[0]))
			}
		}
	}
}

// requireSameBits asserts two runs gave the same bits.
func requireSameBits(t testing.TB, what string, a, b []float64) {
	t.Helper()
	require.Len(t, b, len(a))
	for i := range a {
		require.Equal(t, math.Float64bits(a[i]), math.Float64bits(b[i]), "%s: element %d", what, i)
	}
}

func testMax(t *testing.T, s *suite) {
	for _, dt := range floats {
		for _, withDst := range []bool{true, false} {
			// [5, 7] over dimension 1, with ties and NaNs placed on purpose.
			x := input(dt, kernels.Layout{Shape: []int{5, 7}, Strides: []int{1, 5}}, func(i int) float64 {
				r, c := i/7, i%7
				switch {
				case r == 1 && (c == 2 || c == 5):
					return 9 // a tie: the first wins
				case r == 2 && (c == 3 || c == 6):
					return math.NaN() // the first NaN wins
				case r == 3:
					return -1 // all equal
				}
				return math.Round(s.r.Float64()*16) - 8
			})
			xs := x.vals()
			wantV, wantI := make([]float64, 5), make([]float64, 5)
			for r := range 5 {
				best := 0
				for c := 1; c < 7; c++ {
					v, b := xs[r*7+c], xs[r*7+best]
					if !math.IsNaN(b) && (v > b || math.IsNaN(v)) {
						best = c
					}
				}
				wantV[r], wantI[r] = xs[r*7+best], float64(best)
			}
			idx := dense(dtype.I64, 5, 1)
			bufs := []*buf{dense(dt, 5, 1), idx, x}
			f := func(be kernels.Backend, o []kernels.Operand) {
				d := o[0]
				if !withDst {
					d = kernels.Operand{}
				}
				be.Max(d, o[1], o[2])
			}
			name := fmt.Sprintf("%v dst=%v", dt, withDst)
			s.result(t, name+" positions", bufs, 1, wantI, exact, f)
			if withDst {
				s.result(t, name+" values", bufs, 0, wantV, exact, f)
			}

			// Backward: g at the positions, 0 elsewhere, in dx's strided layout, rounded
			// once to dx's type.
			g := input(dt, kernels.Contiguous(5, 1), s.uniform(-3, 3))
			ix := input(dtype.I64, kernels.Contiguous(5, 1), func(i int) float64 { return wantI[i] })
			gs := g.vals()
			for _, dxt := range outTypes(dt) {
				dx := out(dxt, kernels.Layout{Shape: []int{5, 7}, Strides: []int{1, 5}})
				want := make([]float64, 35)
				for r := range 5 {
					want[r*7+int(wantI[r])] = toType(gs[r], dxt)
				}
				s.result(t, fmt.Sprintf("%s backward into %v", name, dxt), []*buf{dx, g, ix}, 0, want, exact,
					func(be kernels.Backend, o []kernels.Operand) { be.MaxBackward(o[0], o[1], o[2]) })
			}
		}
	}
	// Rows of 100 (cuda: a warp a row, reading words), the maximum placed on purpose:
	// once, twice (the first wins), after two NaNs (the first NaN wins).
	for _, dt := range floats {
		rows := input(dt, kernels.Contiguous(6, 100), func(i int) float64 {
			r, c := i/100, i%100
			switch {
			case c == 17*r+3:
				return 50
			case r == 5 && c == 90:
				return 50 // a second maximum in row 5, after the first (at 88)
			case r == 2 && (c == 60 || c == 70):
				return math.NaN()
			}
			return float64((i*37)%41) - 20
		})
		wantI := []float64{3, 20, 60, 54, 71, 88}
		s.result(t, fmt.Sprintf("%v rows of 100", dt), []*buf{dense(dt, 6, 1), dense(dtype.I64, 6, 1), rows}, 1, wantI, exact,
			func(be kernels.Backend, o []kernels.Operand) { be.Max(o[0], o[1], o[2]) })
	}
	// Over every element: one position, row-major.
	x := input(dtype.F32, kernels.Contiguous(3, 4), func(i int) float64 { return float64((i * 5) % 12) })
	s.result(t, "all", []*buf{dense(dtype.F32), dense(dtype.I64), x}, 1, []float64{7}, exact,
		func(be kernels.Backend, o []kernels.Operand) { be.Max(o[0], o[1], o[2]) })
}
