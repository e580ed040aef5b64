package kernelstest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// testMatmulActivation checks kernels.ActivationMatmul where the backend has it:
// op(a·b + bias) for ReLU and GELU (tanh), with and without a bias, with and without
// the pre-activation written beside it, in each float type it folds and every
// transposition of a and b, against the float64 reference within the product's and
// the activation's tolerance. Which calls it takes is partly the library's choice
// (cuBLASLt wants GELU's input n a multiple of 8): the test logs it and checks the
// values either way (the call then runs Matmul, Binary and Unary, as package tensor
// does), but requires a Linear's own case (a row-major, b transposed, n = 16, F32,
// F16, BF16) folded, and float64 and ReLU's input (which the epilogue writes only as a
// bit mask) declined.
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
						for _, withPre := range []bool{false, true} {
							name := fmt.Sprintf("%v n=%d %v transposed %v bias %v pre %v", op, n, dt, tr, withBias, withPre)
							folded := s.matmulActivation(t, name, op, dt, m, k, n, tr, withBias, withPre)
							switch {
							case dt == dtype.F64 || (op == kernels.Relu && withPre):
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
}

// matmulActivation runs one case of testMatmulActivation and reports whether the
// backend folded it.
func (s *suite) matmulActivation(t *testing.T, name string, op kernels.UnaryOp, dt dtype.DType, m, k, n int, tr [2]bool, withBias, withPre bool) bool {
	a, b := s.matrix(dt, nil, m, k, tr[0]), s.matrix(dt, nil, k, n, tr[1])
	bias, pre := absent(), absent()
	if withBias {
		bias = input(dt, kernels.Contiguous(n), s.uniform(-1, 1))
	}
	if withPre {
		pre = dense(dt, m, n)
	}
	z, mag := refMatmul(a, b, nil, m, k, n)
	bv := bias.bcast([]int{n})
	want := make([]float64, len(z))
	for i := range m {
		for j := range n {
			z[i*n+j] += bv[j]
			want[i*n+j] = refUnary(op, z[i*n+j])
		}
	}
	tl := within(dt, 1e-6+unaryTol(op))
	if dt == dtype.F64 {
		tl = tol{rel: float64(k+1) * 0x1p-52}
	}
	tl.abs = max(tl.abs, tl.rel*(mag+1))
	var folded bool
	// The suite runs the call on kernels/cpu too, which folds nothing.
	call := func(be kernels.Backend, o []kernels.Operand) {
		if am, ok := be.(kernels.ActivationMatmul); ok && be == s.tg.Backend {
			if folded = am.MatmulActivation(op, o[0], o[1], o[2], o[3], o[4]); folded {
				return
			}
		}
		pz := o[0]
		if !o[1].Absent() {
			pz = o[1]
		}
		be.Matmul(pz, o[2], o[3])
		if !o[4].Absent() {
			be.Binary(kernels.Add, pz, pz, o[4])
		}
		be.Unary(op, o[0], pz)
	}
	bufs := func() []*buf { return []*buf{dense(dt, m, n), pre, a, b, bias} }
	s.result(t, name, bufs(), 0, want, tl, call)
	if withPre {
		s.result(t, name+": the pre-activation", bufs(), 1, z, tl, call)
	}
	return folded
}
