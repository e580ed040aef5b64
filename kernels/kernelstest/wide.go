package kernelstest

import (
	"fmt"
	"testing"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/kernelstest/ref"
)

// testWide runs shapes a GPU backend moves 16 bytes at a time (whole rows of a multiple
// of 8 elements, dense, or broadcast along the rows): a binary op with a broadcast row,
// a unary op over a dense block, and conversions between the 4- and 2-byte floats,
// every value of copyValues among them.
func testWide(t *testing.T, s *suite) {
	const rows, cols = 8, 16
	for _, dt := range floats {
		a := input(dt, kernels.Contiguous(rows, cols), s.uniform(-3, 3))
		b := input(dt, kernels.Contiguous(cols), s.uniform(-3, 3))
		as, bs := a.bcast([]int{rows, cols}), b.bcast([]int{rows, cols})
		want := make([]float64, rows*cols)
		for i := range want {
			want[i] = ref.Binary(kernels.Add, as[i], bs[i])
		}
		s.result(t, fmt.Sprintf("add %v [%d %d] + row", dt, rows, cols), []*buf{dense(dt, rows, cols), a, b}, 0, want, within(dt, 1e-7),
			func(be kernels.Backend, o []kernels.Operand) { be.Binary(kernels.Add, o[0], o[1], o[2]) })
		x := input(dt, kernels.Contiguous(3, 40), s.uniform(-3, 3))
		xs := x.vals()
		want = make([]float64, len(xs))
		for i, v := range xs {
			want[i] = ref.Unary(kernels.Relu, v)
		}
		s.result(t, fmt.Sprintf("relu %v [3 40]", dt), []*buf{dense(dt, 3, 40), x}, 0, want, within(dt, unaryTol(kernels.Relu)),
			func(be kernels.Backend, o []kernels.Operand) { be.Unary(kernels.Relu, o[0], o[1]) })
	}
	for _, src := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		vals := copyValues(src)
		for _, dst := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
			const n = 64
			x := input(src, kernels.Contiguous(n), func(i int) float64 { return vals[i%len(vals)] })
			want := make([]float64, n)
			for i, v := range x.vals() {
				want[i] = refConvert(v, src, dst)
			}
			s.result(t, fmt.Sprintf("copy %v to %v, %d dense", src, dst, n), []*buf{dense(dst, n), x}, 0, want, exact,
				func(be kernels.Backend, o []kernels.Operand) { be.Copy(o[0], o[1]) })
		}
	}
}
