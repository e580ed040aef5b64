package cpu

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/subletml/sublet/kernels"

	"github.com/chewxy/math32"
)

// checkUnary panics, before any goroutine starts, on an op kernels does not define.
func checkUnary(op kernels.UnaryOp) {
	if !op.Valid() {
		panic(fmt.Sprintf("kernels/cpu: unknown %v", op))
	}
}

// Unary writes op(x) into dst. x broadcasts to dst's shape; dst may be x itself (same
// buffer and layout) but must not otherwise overlap it.
func Unary(op kernels.UnaryOp, dst, x Operand) {
	checkUnary(op)
	byType(unary[float32], unary[float64], dst.dt, x.dt)(op, dst, x)
}

func unary[T float](op kernels.UnaryOp, dst, x Operand) {
	elementwise(op.String(), dst, []Operand{x}, unaryKernel[T]{op})
}

type unaryKernel[T float] struct{ op kernels.UnaryOp }

func (k unaryKernel[T]) run(out []T, in eltIns[T]) { unaryRun(k.op, out, in[0]) }

// UnaryBackward writes the gradient of op's input into dx given the output's gradient
// g and saved, which is op's output y when op.SavesOutput() and its input x otherwise
// (any operand for Neg). g and saved broadcast to dx's shape; dx may be g itself.
func UnaryBackward(op kernels.UnaryOp, dx, g, saved Operand) {
	checkUnary(op)
	byType(unaryBackward[float32], unaryBackward[float64], dx.dt, g.dt, saved.dt)(op, dx, g, saved)
}

func unaryBackward[T float](op kernels.UnaryOp, dx, g, saved Operand) {
	elementwise(unaryBackwardNames[op], dx, []Operand{g, saved}, unaryGradKernel[T]{op})
}

type unaryGradKernel[T float] struct{ op kernels.UnaryOp }

func (k unaryGradKernel[T]) run(out []T, in eltIns[T]) { unaryGradRun(k.op, out, in[0], in[1]) }

// unaryBackwardNames name the backward kernels of the unary ops in messages.
var unaryBackwardNames = func() (n [kernels.GeluErf + 1]string) {
	for op := kernels.Neg; op <= kernels.GeluErf; op++ {
		n[op] = op.String() + " backward"
	}
	return n
}()

const (
	sqrt2OverPi = 0.7978845608028654 // √(2/π)
	geluCoef    = 0.044715
	invSqrt2    = 0.7071067811865476
	invSqrt2Pi  = 0.3989422804014327 // 1/√(2π)
)

func unaryRun[T float](op kernels.UnaryOp, dst, x []T) {
	switch op {
	case kernels.Neg:
		mapRun(dst, x, func(v T) T { return -v })
	case kernels.Abs:
		mapRun(dst, x, abs[T])
	case kernels.Exp:
		expTo(dst, x)
	case kernels.Log:
		mapRun(dst, x, logOf[T]())
	case kernels.Sqrt:
		mapRun(dst, x, sqrtf[T])
	case kernels.Tanh:
		d32, ok := as32(dst)
		if !ok {
			mapRun(dst, x, func(v T) T { return T(math.Tanh(float64(v))) })
			return
		}
		x32, _ := as32(x)
		forChunks(len(x), func(lo, hi int) {
			var e [chunk]float32
			es := e[:hi-lo]
			mapRun(es, x32[lo:hi], func(v float32) float32 { return 2 * math32.Abs(v) })
			expTo(es, es)
			zipRun(d32[lo:hi], x32[lo:hi], es, tanhFromExp)
		})
	case kernels.Sigmoid:
		// 1/(1+e^-x): e^-x overflowing to +Inf gives 0, as it should.
		mapRun(dst, x, func(v T) T { return -v })
		expTo(dst, dst)
		mapRun(dst, dst, func(e T) T { return 1 / (1 + e) })
	case kernels.Relu:
		i := reluVector(dst[:len(x)], x)
		mapRun(dst[i:], x[i:], func(v T) T { return max(v, 0) })
	case kernels.GeluTanh:
		// x/2·(1+tanh u) = x·σ(2u) = x/(1+e^-2u), u = √(2/π)(x+0.044715x³).
		forChunks(len(x), func(lo, hi int) {
			var e [chunk]T
			es := e[:hi-lo]
			mapRun(es, x[lo:hi], geluMinus2U[T])
			expTo(es, es)
			zipRun(dst[lo:hi], x[lo:hi], es, func(v, e T) T { return v / (1 + e) })
		})
	case kernels.GeluErf:
		erf := erfOf[T]()
		mapRun(dst, x, func(v T) T { return 0.5 * v * (1 + erf(v*invSqrt2)) })
	default:
		panic(fmt.Sprintf("kernels/cpu: unknown %v", op))
	}
}

// mapRun writes f(x[i]) into dst[i]; it inlines, and f with it.
func mapRun[T float](dst, x []T, f func(T) T) {
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = f(v)
	}
}

// zipRun writes f(a[i], b[i]) into dst[i]; it inlines, and f with it.
func zipRun[T float](dst, a, b []T, f func(x, y T) T) {
	dst = dst[:len(a)]
	b = b[:len(a)]
	for i, v := range a {
		dst[i] = f(v, b[i])
	}
}

// tanhFromExp is tanh x given e = e^(2|x|): 1 - 2/(e+1) with x's sign, or, for
// |x| < 0.625 where that cancels, Cephes' odd polynomial (within an ulp or two).
func tanhFromExp(x, e float32) float32 {
	if a := math32.Abs(x); a < 0.625 {
		if x == 0 {
			return x // keeps -0
		}
		z := x * x
		p := ((((-5.70498872745e-3*z+2.06390887954e-2)*z-5.37397155531e-2)*z+1.33314422036e-1)*z - 3.33332819422e-1)
		return x + x*z*p
	}
	return math32.Copysign(1-2/(e+1), x)
}

// geluMinus2U is -2u for GeluTanh's u = √(2/π)(x+0.044715x³).
func geluMinus2U[T float](x T) T { return -2 * sqrt2OverPi * (x + geluCoef*x*x*x) }

// forChunks calls fn on consecutive ranges of [0, n) at most chunk long, for code that
// needs stack scratch per element.
func forChunks(n int, fn func(lo, hi int)) {
	for lo := 0; lo < n; lo += chunk {
		fn(lo, min(lo+chunk, n))
	}
}

// reluGradRun writes g[i] where y[i] > 0 or is NaN and +0 where y[i] <= 0 (PyTorch's
// threshold_backward), through a mask of the bits (a conditional move) rather than a
// branch: with y's signs at random, a branch mispredicts on every other element.
func reluGradRun[T float](dst, g, y []T) {
	i := reluGradVector(dst[:len(g)], g, y[:len(g)])
	dst, g, y = dst[i:], g[i:], y[i:]
	if is32[T]() {
		keepBits[T, uint32](dst, g, y)
	} else {
		keepBits[T, uint64](dst, g, y)
	}
}

// keepBits is reluGradRun with U the unsigned integer of T's size.
func keepBits[T float, U uint32 | uint64](dst, g, y []T) {
	dst = dst[:len(g)]
	y = y[:len(g)]
	for i, gv := range g {
		var m U
		if !(y[i] <= 0) {
			m = ^m
		}
		b := *(*U)(unsafe.Pointer(&gv)) & m
		dst[i] = *(*T)(unsafe.Pointer(&b))
	}
}

// unaryGradRun writes dst[i] = g[i]·op'(x) where s is y or x as SavesOutput says.
func unaryGradRun[T float](op kernels.UnaryOp, dst, g, s []T) {
	switch op {
	case kernels.Neg:
		mapRun(dst, g, func(gv T) T { return -gv })
	case kernels.Abs:
		zipRun(dst, g, s, func(gv, x T) T {
			switch {
			case x > 0:
				return gv
			case x < 0:
				return -gv
			}
			return 0 * gv
		})
	case kernels.Exp:
		zipRun(dst, g, s, func(gv, y T) T { return gv * y })
	case kernels.Log:
		zipRun(dst, g, s, func(gv, x T) T { return gv / x })
	case kernels.Sqrt:
		zipRun(dst, g, s, func(gv, y T) T { return gv / (2 * y) })
	case kernels.Tanh:
		zipRun(dst, g, s, func(gv, y T) T { return gv * (1 - y*y) })
	case kernels.Sigmoid:
		zipRun(dst, g, s, func(gv, y T) T { return gv * y * (1 - y) })
	case kernels.Relu:
		reluGradRun(dst, g, s)
	case kernels.GeluTanh:
		// tanh u = 2/(1+e^-2u) - 1, which stays finite when e^-2u overflows.
		forChunks(len(g), func(lo, hi int) {
			var e [chunk]T
			es := e[:hi-lo]
			mapRun(es, s[lo:hi], geluMinus2U[T])
			expTo(es, es)
			xs, gs, ds := s[lo:hi], g[lo:hi], dst[lo:hi]
			for i, ev := range es {
				x := xs[i]
				t := 2/(1+ev) - 1
				du := sqrt2OverPi * (1 + 3*geluCoef*x*x)
				ds[i] = gs[i] * (0.5*(1+t) + 0.5*x*(1-t*t)*du)
			}
		})
	case kernels.GeluErf:
		erf := erfOf[T]()
		forChunks(len(g), func(lo, hi int) {
			var e [chunk]T
			es := e[:hi-lo]
			mapRun(es, s[lo:hi], func(x T) T { return -0.5 * x * x })
			expTo(es, es)
			xs, gs, ds := s[lo:hi], g[lo:hi], dst[lo:hi]
			for i, ev := range es {
				x := xs[i]
				cdf := 0.5 * (1 + erf(x*invSqrt2))
				ds[i] = gs[i] * (cdf + x*invSqrt2Pi*ev)
			}
		})
	default:
		panic(fmt.Sprintf("kernels/cpu: unknown %v", op))
	}
}
