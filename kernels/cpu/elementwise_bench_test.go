package cpu

import (
	"math/rand/v2"
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

func BenchmarkLog1M(b *testing.B) {
	benchElementwise(b, 1<<20, func(d, x, y Operand) { Unary(kernels.Log, d, y) })
}

func BenchmarkAbsSqrt1M(b *testing.B) {
	benchElementwise(b, 1<<20, func(d, x, _ Operand) {
		Unary(kernels.Abs, d, x)
		Unary(kernels.Sqrt, d, d)
	})
}

func BenchmarkTanhSigmoid1M(b *testing.B) {
	benchElementwise(b, 1<<20, func(d, x, _ Operand) {
		Unary(kernels.Tanh, d, x)
		Unary(kernels.Sigmoid, d, d)
	})
}

// BenchmarkPow1M raises x to 2.5 and takes the gradient for the exponent (x^2.5·ln x).
func BenchmarkPow1M(b *testing.B) {
	e := F32([]float32{2.5}, kernels.Layout{})
	benchElementwise(b, 1<<20, func(d, x, y Operand) {
		Binary(kernels.Pow, d, x, e)
		BinaryBackward(kernels.Pow, kernels.ArgB, d, y, x, e)
	})
}

// BenchmarkAdd1MF64 is BenchmarkAdd1M on float64 operands.
func BenchmarkAdd1MF64(b *testing.B) {
	x, y, d := make([]float64, 1<<20), make([]float64, 1<<20), make([]float64, 1<<20)
	for i := range x {
		x[i] = float64(i%100) / 50
		y[i] = 1
	}
	l := kernels.Contiguous(len(x))
	b.SetBytes(int64(24 * len(x)))
	for b.Loop() {
		Binary(kernels.Add, F64(d, l), F64(x, l), F64(y, l))
	}
}

// BenchmarkReluBackward1M is Relu's gradient where the output is positive or zero at
// random, as a layer's activations are.
func BenchmarkReluBackward1M(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	y := make([]float32, 1<<20)
	for i := range y {
		y[i] = max(float32(r.NormFloat64()), 0)
	}
	benchElementwise(b, len(y), func(d, _, g Operand) { UnaryBackward(kernels.Relu, d, g, F32(y, g.Layout)) })
}
