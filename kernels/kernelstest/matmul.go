package kernelstest

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// matrix is an operand [batch..., rows, cols], row-major or stored transposed (its
// last two strides swapped), each value drawn in [-1, 1).
func (s *suite) matrix(dt dtype.DType, batch []int, rows, cols int, transposed bool) *buf {
	shape := append(append([]int(nil), batch...), rows, cols)
	l := kernels.Contiguous(shape...)
	if transposed {
		r := len(shape)
		st := kernels.Contiguous(append(append([]int(nil), batch...), cols, rows)...).Strides
		st[r-2], st[r-1] = st[r-1], st[r-2]
		l = kernels.Layout{Shape: shape, Strides: st}
	}
	return input(dt, l, s.uniform(-1, 1))
}

// refMatmul is a·b in float64 over broadcast batches.
func refMatmul(a, b *buf, batch []int, m, k, n int) (want []float64, mag float64) {
	as, bs := a.bcast(append(append([]int(nil), batch...), m, k)), b.bcast(append(append([]int(nil), batch...), k, n))
	nb := numel(batch)
	want = make([]float64, nb*m*n)
	for p := range nb {
		for i := range m {
			for j := range n {
				var sum, abs float64
				for q := range k {
					x := as[p*m*k+i*k+q] * bs[p*k*n+q*n+j]
					sum += x
					abs += math.Abs(x)
				}
				want[p*m*n+i*n+j] = sum
				mag = max(mag, abs)
			}
		}
	}
	return want, mag
}

func testMatmul(t *testing.T, s *suite) {
	type shape struct {
		batchA, batchB, batch []int
		m, k, n               int
	}
	shapes := []shape{
		{nil, nil, nil, 3, 5, 4},
		{nil, nil, nil, 1, 7, 1},
		{nil, nil, nil, 17, 33, 9},
		{[]int{2, 3}, nil, []int{2, 3}, 4, 5, 6},      // a weight shared by the batch
		{[]int{2, 1}, []int{3}, []int{2, 3}, 3, 4, 2}, // batches broadcast both ways
	}
	for _, sh := range shapes {
		for _, dts := range [][3]dtype.DType{
			{dtype.F32, dtype.F32, dtype.F32}, {dtype.F16, dtype.F16, dtype.F16}, {dtype.BF16, dtype.BF16, dtype.BF16},
			{dtype.F16, dtype.F16, dtype.F32}, {dtype.F16, dtype.F32, dtype.F32}, {dtype.BF16, dtype.F16, dtype.F32},
			// float64 products: of F64 operands, of an F64 and another, of F32 into
			// F64 (float32 values multiply exactly in float64), of F64 into F32.
			{dtype.F64, dtype.F64, dtype.F64}, {dtype.F64, dtype.F32, dtype.F64}, {dtype.F32, dtype.F16, dtype.F64},
			{dtype.F64, dtype.F64, dtype.F32},
		} {
			for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
				a := s.matrix(dts[0], sh.batchA, sh.m, sh.k, tr[0])
				b := s.matrix(dts[1], sh.batchB, sh.k, sh.n, tr[1])
				want, mag := refMatmul(a, b, sh.batch, sh.m, sh.k, sh.n)
				tl := within(dts[2], 1e-6)
				if dts[2] == dtype.F64 {
					// k products and sums in any order are off by at most k·2⁻⁵³ of the
					// sum of the products' magnitudes, the reference's and the kernel's.
					tl = tol{rel: float64(sh.k) * 0x1p-52}
				}
				tl.abs = max(tl.abs, tl.rel*mag)
				d := dense(dts[2], append(append([]int(nil), sh.batch...), sh.m, sh.n)...)
				s.result(t, fmt.Sprintf("%v %v·%v→%v transposed %v", sh, dts[0], dts[1], dts[2], tr), []*buf{d, a, b}, 0, want, tl,
					func(be kernels.Backend, o []kernels.Operand) { be.Matmul(o[0], o[1], o[2]) })
			}
		}
	}
	// A strided output, k = 0 (zeros), and no output.
	for _, dt := range rowTypes {
		a, b := s.matrix(dt, nil, 3, 4, false), s.matrix(dt, nil, 4, 2, true)
		want, mag := refMatmul(a, b, nil, 3, 4, 2)
		s.result(t, fmt.Sprintf("%v into a column-major output", dt), []*buf{out(dt, kernels.Layout{Shape: []int{3, 2}, Strides: []int{1, 3}}), a, b}, 0,
			want, tolIn(dt, tol{rel: 1e-6, abs: 1e-6 * mag}), func(be kernels.Backend, o []kernels.Operand) { be.Matmul(o[0], o[1], o[2]) })
	}
	for _, dt := range []dtype.DType{dtype.F16, dtype.F64} {
		s.result(t, fmt.Sprintf("%v k = 0", dt), []*buf{dense(dt, 3, 2), s.matrix(dt, nil, 3, 0, false), s.matrix(dt, nil, 0, 2, false)}, 0,
			make([]float64, 6), exact, func(be kernels.Backend, o []kernels.Operand) { be.Matmul(o[0], o[1], o[2]) })
	}
	b := s.matrix(dtype.F32, nil, 4, 2, true)
	s.result(t, "no rows", []*buf{dense(dtype.F32, 0, 2), s.matrix(dtype.F32, nil, 0, 4, false), b}, 0, nil, exact,
		func(be kernels.Backend, o []kernels.Operand) { be.Matmul(o[0], o[1], o[2]) })
}

// testMatmulBias checks kernels.BiasMatmul where the backend has it: a·b + bias in each
// float type it folds, every transposition of a and b (a Linear's weight is a
// transposed view), against the float64 reference within the product's tolerance; and
// float64 operands, which it declines (false) for Matmul and Binary to run.
func testMatmulBias(t *testing.T, s *suite) {
	if _, ok := s.tg.Backend.(kernels.BiasMatmul); !ok {
		t.Skip("the backend folds no bias into a product")
	}
	const m, k, n = 17, 33, 12
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16, dtype.F64} {
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			a, b := s.matrix(dt, nil, m, k, tr[0]), s.matrix(dt, nil, k, n, tr[1])
			bias := input(dt, kernels.Contiguous(n), s.uniform(-1, 1))
			want, mag := refMatmul(a, b, nil, m, k, n)
			bv := bias.vals()
			for i := range m {
				for j := range n {
					want[i*n+j] += bv[j]
				}
			}
			tl := within(dt, 1e-6)
			if dt == dtype.F64 { // as testMatmul's, with one more rounding for the bias
				tl = tol{rel: float64(k+1) * 0x1p-52}
			}
			tl.abs = max(tl.abs, tl.rel*(mag+1))
			var folded bool
			name := fmt.Sprintf("%v transposed %v", dt, tr)
			// The suite runs the call on kernels/cpu too, there through Matmul and Binary: the reference.
			s.result(t, name, []*buf{dense(dt, m, n), a, b, bias}, 0, want, tl, func(be kernels.Backend, o []kernels.Operand) {
				if bm, ok := be.(kernels.BiasMatmul); ok && be == s.tg.Backend {
					folded = bm.MatmulBias(o[0], o[1], o[2], o[3])
					if folded {
						return
					}
				}
				be.Matmul(o[0], o[1], o[2])
				be.Binary(kernels.Add, o[0], o[0], o[3])
			})
			require.Equal(t, dt != dtype.F64, folded, "%s: MatmulBias reported %v", name, folded)
		}
	}
}

// testMatmulBiasGrad checks kernels.BiasGradMatmul where the backend has it: a·b and
// the row sums of a in each float type it folds, every transposition of a and b (a
// Linear's weight gradient reads the output's gradient transposed), against the
// float64 references within the product's tolerance; and float64 operands, which it
// declines (false) for Matmul and Sum to run. Which others it takes is the library's
// choice (cuBLASLt 13.1 on an H100 folds F32, F16 and BF16 where a is read transposed,
// as a Linear's backward reads it, and none where it is not): the test logs it, and
// checks the values either way.
func testMatmulBiasGrad(t *testing.T, s *suite) {
	if _, ok := s.tg.Backend.(kernels.BiasGradMatmul); !ok {
		t.Skip("the backend sums no operand in a product")
	}
	const m, k, n = 17, 33, 12
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16, dtype.F64} {
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			a, b := s.matrix(dt, nil, m, k, tr[0]), s.matrix(dt, nil, k, n, tr[1])
			want, mag := refMatmul(a, b, nil, m, k, n)
			av := a.bcast([]int{m, k})
			sums := make([]float64, m)
			for i := range m {
				for q := range k {
					sums[i] += av[i*k+q]
				}
			}
			tl := within(dt, 1e-6)
			if dt == dtype.F64 {
				tl = tol{rel: float64(k) * 0x1p-52}
			}
			tl.abs = max(tl.abs, tl.rel*(mag+float64(k)))
			var folded bool
			call := func(be kernels.Backend, o []kernels.Operand) {
				if bm, ok := be.(kernels.BiasGradMatmul); ok && be == s.tg.Backend {
					if folded = bm.MatmulBiasGrad(o[0], o[1], o[2], o[3]); folded {
						return
					}
				}
				be.Matmul(o[0], o[2], o[3])
				col := o[1]
				col.Layout = kernels.Contiguous(m, 1) // Sum reduces where dst has size 1
				be.Sum(col, o[2])
			}
			bufs := func() []*buf { return []*buf{dense(dt, m, n), dense(dt, m), a, b} }
			name := fmt.Sprintf("%v transposed %v", dt, tr)
			s.result(t, name+": the product", bufs(), 0, want, tl, call)
			s.result(t, name+": the row sums", bufs(), 1, sums, tl, call)
			if dt == dtype.F64 {
				require.False(t, folded, "%s: MatmulBiasGrad reported true", name)
			}
			t.Logf("%s: in the product's pass: %v", name, folded)
		}
	}
}
