package kernelstest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/kernelstest/ref"
)

// testMatmulActivation checks kernels.ActivationMatmul where the backend has it:
// Relu(a·b + bias), with and without a bias, in each float type and every
// transposition of a and b, against the float64 reference within the product's
// tolerance. Which calls it takes is partly the library's choice: the test logs it and
// checks the values either way (the call then runs Matmul, Binary and Unary, as package
// tensor does), but requires a Linear's own case (a row-major, b transposed, n = 16,
// F32, F16, BF16) folded, and float64 and any activation but ReLU (GeluTanh here)
// declined, as the interface says.
func testMatmulActivation(t *testing.T, s *suite) {
	if _, ok := s.tg.Backend.(kernels.ActivationMatmul); !ok {
		t.Skip("the backend folds no activation into a product")
	}
	const m, k = 17, 33
	for _, op := range []kernels.UnaryOp{kernels.Relu, kernels.GeluTanh} {
		for _, n := range []int{16, 12} {
			for _, dt := range floats {
				for _, tr := range [][2]bool{{false, true}, {false, false}, {true, false}, {true, true}} {
					for _, withBias := range []bool{true, false} {
						name := fmt.Sprintf("%v n=%d %v transposed %v bias %v", op, n, dt, tr, withBias)
						folded := s.matmulActivation(t, name, op, dt, m, k, n, tr, withBias)
						switch {
						case dt == dtype.F64 || op != kernels.Relu:
							require.False(t, folded, "%s: MatmulActivation reported true", name)
						case n == 16 && tr == [2]bool{false, true}:
							require.True(t, folded, "%s: MatmulActivation reported false for a Linear's product", name)
						}
						t.Logf("%s: in the product's pass: %v", name, folded)
					}
				}
			}
		}
	}
}

// matmulActivation runs one case of testMatmulActivation and reports whether the
// backend folded it.
func (s *suite) matmulActivation(t *testing.T, name string, op kernels.UnaryOp, dt dtype.DType, m, k, n int, tr [2]bool, withBias bool) bool {
	a, b := s.matrix(dt, nil, m, k, tr[0]), s.matrix(dt, nil, k, n, tr[1])
	bias := absent()
	if withBias {
		bias = input(dt, kernels.Contiguous(n), s.uniform(-1, 1))
	}
	want, mag := refMatmul(a, b, nil, m, k, n)
	bv := bias.bcast([]int{n})
	for i := range m {
		for j := range n {
			want[i*n+j] = ref.Unary(op, want[i*n+j]+bv[j])
		}
	}
	tl := within(dt, 1e-6+unaryTol(op))
	if dt == dtype.F64 {
		tl = tol{rel: float64(k+1) * 0x1p-52}
	}
	tl.abs = max(tl.abs, tl.rel*(mag+1))
	var folded bool
	// The suite runs the call on kernels/cpu too, there through Matmul, Binary and Unary: the reference.
	s.result(t, name, []*buf{dense(dt, m, n), a, b, bias}, 0, want, tl, func(be kernels.Backend, o []kernels.Operand) {
		if am, ok := be.(kernels.ActivationMatmul); ok && be == s.tg.Backend {
			if folded = am.MatmulActivation(op, o[0], o[1], o[2], o[3]); folded {
				return
			}
		}
		be.Matmul(o[0], o[1], o[2])
		if !o[3].Absent() {
			be.Binary(kernels.Add, o[0], o[0], o[3])
		}
		be.Unary(op, o[0], o[0])
	})
	return folded
}
