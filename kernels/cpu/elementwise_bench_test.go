package cpu

import (
	"testing"

	"github.com/subletml/sublet/kernels"
)

func benchElementwise(b *testing.B, n int, run func(dst, x, y Operand)) {
	x := make([]float32, n)
	y := make([]float32, n)
	d := make([]float32, n)
	for i := range x {
		x[i] = float32(i%100) / 50
		y[i] = 1
	}
	l := kernels.Contiguous(n)
	dst, xo, yo := F32(d, l), F32(x, l), F32(y, l)
	b.SetBytes(int64(12 * n))
	for b.Loop() {
		run(dst, xo, yo)
	}
}

func BenchmarkAdd1M(b *testing.B) {
	benchElementwise(b, 1<<20, func(d, x, y Operand) { Binary(kernels.Add, d, x, y) })
}

func BenchmarkExp1M(b *testing.B) {
	benchElementwise(b, 1<<20, func(d, x, _ Operand) { Unary(kernels.Exp, d, x) })
}

func BenchmarkGeluTanh1M(b *testing.B) {
	benchElementwise(b, 1<<20, func(d, x, _ Operand) { Unary(kernels.GeluTanh, d, x) })
}
