package cuda

import (
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// launched runs f on the recording b and returns its launches.
func launched(rec *recorder, f func()) []launchRec {
	rec.take()
	f()
	l, _ := rec.take()
	return l
}

// TestComputeTypeIsKernelsCPUs: each method launches the float64 variant exactly when
// kernels/cpu runs its float64 kernel: an operand of the elementwise, copy, reduction
// and product kernels is F64 (a Scalar is not, nor an absent operand), the first input
// of a row kernel is F64.
func TestComputeTypeIsKernelsCPUs(t *testing.T) {
	b, rec := newRecording(t)
	var o operands
	f32 := func(shape ...int) kernels.Operand { return o.dense(dtype.F32, shape...) }
	f64 := func(shape ...int) kernels.Operand { return o.dense(dtype.F64, shape...) }
	f16 := func(shape ...int) kernels.Operand { return o.dense(dtype.F16, shape...) }
	mask, idx := o.dense(dtype.Bool, 4, 5), o.dense(dtype.I64, 4, 1)
	labels := o.dense(dtype.I64, 4)
	for _, c := range []struct {
		what string
		in64 bool
		f    func()
	}{
		{"unary of F64 into F32", true, func() { b.Unary(kernels.Exp, f32(4, 5), f64(4, 5)) }},
		{"unary of F32 into F64", true, func() { b.Unary(kernels.Exp, f64(4, 5), f32(4, 5)) }},
		{"unary of F16 into F32", false, func() { b.Unary(kernels.Exp, f32(4, 5), f16(4, 5)) }},
		{"unary backward, the saved input F64", true, func() { b.UnaryBackward(kernels.Exp, f32(4, 5), f32(4, 5), f64(4, 5)) }},
		{"binary with a Scalar, which is no F64 operand", false, func() { b.Binary(kernels.Mul, f32(4, 5), f32(4, 5), kernels.Scalar(0.1)) }},
		{"binary of F16 and F64", true, func() { b.Binary(kernels.Add, f16(4, 5), f16(4, 5), f64(5)) }},
		{"binary backward, b F64", true, func() { b.BinaryBackward(kernels.Mul, kernels.ArgA, f32(4, 5), f32(4, 5), kernels.Operand{}, f64(5)) }},
		{"binary backward, absent operands", false, func() {
			b.BinaryBackward(kernels.Add, kernels.ArgA, f32(4, 5), f32(4, 5), kernels.Operand{}, kernels.Operand{})
		}},
		{"axpy of F64 into F32", true, func() { b.Axpy(f32(4, 5), 0.5, f64(5)) }},
		{"dropout of F64", true, func() { b.Dropout(f32(4, 5), f64(4, 5), mask, 0.5) }},
		{"copy F64 to F16", true, func() { b.Copy(f16(4, 5), f64(4, 5)) }},
		{"copy I64 to F64", true, func() { b.Copy(f64(4, 1), idx) }},
		{"copy I64 to F32", false, func() { b.Copy(f32(4, 1), idx) }},
		{"sum of F64 into F32", true, func() { b.Sum(f32(1, 5), f64(4, 5)) }},
		{"mean of I64 into F64", true, func() { b.Mean(f64(1), idx) }},
		{"max of F64 without values", true, func() { b.Max(kernels.Operand{}, idx, f64(4, 5)) }},
		{"max backward of an F64 gradient", true, func() { b.MaxBackward(f32(4, 5), f64(4, 1), idx) }},
		{"non_finite of F64", true, func() { b.NonFinite(f64(4, 5)) }},
		{"unscale of F64", true, func() { b.Unscale(f64(4, 5), 0.5, f32()) }},
		{"product of F64 and F32", true, func() { b.Matmul(f64(4, 4), f64(4, 5), f32(5, 4)) }},
		{"product of F32 into F64", true, func() { b.Matmul(f64(4, 4), f32(4, 5), f32(5, 4)) }},
		{"product of F64 into F32", true, func() { b.Matmul(f32(4, 4), f64(4, 5), f64(5, 4)) }},
		{"bce of an F64 target", true, func() { _ = b.BinaryCrossEntropy(f32(4, 5), f32(4, 5), f64(5)) }},
		{"bce backward of an F64 gradient", true, func() { b.BinaryCrossEntropyBackward(kernels.ArgA, f32(4, 5), f64(5), f32(4, 5), f32(4, 5)) }},
		{"bce with logits, F64 weight", true, func() { b.BinaryCrossEntropyWithLogits(f32(4, 5), f32(4, 5), f32(4, 5), f64(5)) }},
		{"its target's gradient, the unread target F64", true, func() {
			b.BinaryCrossEntropyWithLogitsBackward(kernels.ArgB, f32(4, 5), f32(4, 5), f32(4, 5), f64(4, 5), kernels.Operand{})
		}},
		{"addc, b F64", true, func() { b.Addc(kernels.Div, f32(4, 5), f32(4, 5), kernels.Scalar(2), f64(5), 0.5) }},
		{"softmax of F64 rows", true, func() { b.Softmax(f64(4, 5), f64(4, 5), 4, 5, 1) }},
		{"log_softmax backward of F64 columns", true, func() { b.LogSoftmaxBackward(f64(4, 5), f64(4, 5), f64(4, 5), 2, 2, 5) }},
		{"layer norm of F64 rows", true, func() { b.LayerNorm(f64(4, 5), f64(4), f64(4), f64(4, 5), f64(5), kernels.Operand{}, 4, 5, 1e-5) }},
		{"layer norm backward of F64 rows", true, func() {
			b.LayerNormBackward(f64(4, 5), f64(5), f64(5), f64(4, 5), f64(4, 5), f64(4), f64(4), kernels.Operand{}, 4, 5)
		}},
		{"cross entropy of F64 logits into an F16 loss", true, func() { _ = b.CrossEntropy(f16(), f64(5), f64(4, 5), labels, 4, 5, -100) }},
		{"its backward for an F32 gradient", true, func() { b.CrossEntropyBackward(f64(4, 5), f64(4, 5), f64(5), labels, f32(), 4, 5, -100) }},
		{"cross entropy of F32 logits into an F64 loss", false, func() { _ = b.CrossEntropy(f64(), f32(5), f32(4, 5), labels, 4, 5, -100) }},
		{"mse of F64 into a BF16 loss", true, func() { b.MSE(o.dense(dtype.BF16), f64(3<<15), f64(3<<15)) }},
		{"mse backward of F64 for an F32 gradient", true, func() { b.MSEBackward(f64(20), f64(20), f64(20), f64(20), f32()) }},
		{"embedding of an F64 table", true, func() { _ = b.Embedding(f64(4, 5), f64(7, 5), labels, 5) }},
		{"embedding backward into an F64 table", true, func() { _ = b.EmbeddingBackward(f64(7, 5), f64(4, 5), labels, 5) }},
		{"sgd of F64 parameters", true, func() { b.SGD(kernels.SGD{LR: 0.1, Momentum: 0.9}, f64(9), f64(9), f64(9), false) }},
		{"adam of F64 parameters", true, func() { b.Adam(kernels.Adam{LR: 0.1, Beta1: 0.9, Beta2: 0.99}, 2, f64(9), f64(9), f64(9), f64(9)) }},
		{"adam of F32 parameters", false, func() { b.Adam(kernels.Adam{LR: 0.1, Beta1: 0.9, Beta2: 0.99}, 2, f32(9), f32(9), f32(9), f32(9)) }},
	} {
		ls := launched(rec, c.f)
		require.NotEmpty(t, ls, c.what)
		want, other := "_f32", "_f64"
		if c.in64 {
			want, other = other, want
		}
		for _, l := range ls {
			name := entries[l.k].name
			if !strings.Contains(name, "_f32") && !strings.Contains(name, "_f64") {
				continue // fill, dropout_mask: no compute type
			}
			assert.Contains(t, name, want, c.what)
			assert.NotContains(t, name, other, c.what)
		}
	}
}

// requireNumber asserts that a carries v in the compute type: its float64 bits for a
// float64 kernel, else float32(v)'s.
func requireNumber(t *testing.T, what string, a argRec, in64 bool, v float64) {
	t.Helper()
	if in64 {
		require.Equal(t, argRec{size: 8, bits: math.Float64bits(v)}, argRec{size: a.size, bits: a.bits}, what)
		return
	}
	require.Equal(t, argRec{size: 4, bits: uint64(math.Float32bits(float32(v)))}, argRec{size: a.size, bits: a.bits}, what)
}

// TestNumbersInTheComputeType: every number argument reaches a kernel rounded once to
// the type the kernel computes in, as kernels/cpu rounds it (Dropout's scale and
// Adam's corrections computed first, as there; DropoutMask's threshold from p rounded
// to float32 whatever the mask drops); an immediate is read in float64 where the
// output is F64, else rounded to float32.
func TestNumbersInTheComputeType(t *testing.T) {
	b, rec := newRecording(t)
	var o operands
	const v = 0.1 // no float32 holds it
	for _, dt := range []dtype.DType{dtype.F32, dtype.F64} {
		in64 := dt == dtype.F64
		x := o.dense(dt, 4, 5)
		name := dt.String()
		one := func(f func()) launchRec {
			t.Helper()
			ls := launched(rec, f)
			require.Len(t, ls, 1)
			return ls[0]
		}
		requireNumber(t, name+" axpy", one(func() { b.Axpy(x, v, x) }).args[1], in64, v)
		requireNumber(t, name+" addc", one(func() { b.Addc(kernels.Mul, x, x, x, x, v) }).args[2], in64, v)
		requireNumber(t, name+" unscale", one(func() { b.Unscale(x, v, o.dense(dtype.F32)) }).args[1], in64, v)
		scale := float64(1 / (1 - float32(v)))
		if in64 {
			scale = 1 / (1 - v)
		}
		requireNumber(t, name+" dropout", one(func() { b.Dropout(x, x, o.dense(dtype.Bool, 4, 5), v) }).args[1], in64, scale)
		ln := one(func() {
			b.LayerNorm(x, o.dense(dt, 4), o.dense(dt, 4), x, kernels.Operand{}, kernels.Operand{}, 4, 5, 1e-5)
		})
		requireNumber(t, name+" layer_norm eps", ln.args[len(ln.args)-1], in64, 1e-5)

		sgd := kernels.SGD{LR: v, Momentum: 0.9, Dampening: 0.3, WeightDecay: 1e-4}
		l := one(func() { b.SGD(sgd, x, x, x, false) })
		for i, want := range []float64{sgd.LR, sgd.Momentum, sgd.Dampening, sgd.WeightDecay} {
			requireNumber(t, name+" sgd", l.args[4+i], in64, want)
		}
		adam := kernels.Adam{LR: v, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Decoupled: true}
		l = one(func() { b.Adam(adam, 3, x, x, x, x) })
		bc1, bc2 := 1-math.Pow(adam.Beta1, 3), 1-math.Pow(adam.Beta2, 3)
		for i, want := range []float64{adam.Beta1, adam.Beta2, 1 - adam.Beta1, 1 - adam.Beta2, adam.Eps, adam.WeightDecay,
			adam.LR / bc1, 1 / math.Sqrt(bc2), 1 - adam.LR*adam.WeightDecay} {
			requireNumber(t, name+" adam", l.args[5+i], in64, want)
		}

		// An immediate: in the output's type, as kernels/cpu reads it, whatever else
		// the op computes in.
		w := walkOf(t, one(func() { b.Binary(kernels.Mul, x, x, kernels.Scalar(v)) }).args[0])
		want := float64(float32(v))
		if in64 {
			want = v
		}
		assert.Equal(t, want, w.imm[2], name)
	}
	w := walkOf(t, launched(rec, func() { b.Binary(kernels.Mul, o.dense(dtype.F32, 3), o.dense(dtype.F64, 3), kernels.Scalar(v)) })[0].args[0])
	assert.Equal(t, float64(float32(v)), w.imm[2], "an F32 output reads it as float32, in a float64 kernel too")

	// The mask's threshold is p rounded to float32 times 2³², for every mask.
	l := launched(rec, func() { b.DropoutMask(o.dense(dtype.Bool, 9), v, 3) })
	require.Len(t, l, 1)
	assert.Equal(t, uint64(math.Ldexp(float64(float32(v)), 32)), l[0].args[3].bits)
}

// TestFloat64ProductsOnCuBLAS: three F64 operands go to cuBLAS as CUDA_R_64F with
// CUBLAS_COMPUTE_64F and double scalars, TF32 or not; any other mix with an F64
// operand runs on the fallback in double.
func TestFloat64ProductsOnCuBLAS(t *testing.T) {
	b, rec := newRecording(t)
	var o operands
	x, w, out := o.dense(dtype.F64, 4, 5), o.dense(dtype.F64, 5, 3), o.dense(dtype.F64, 4, 3)
	for _, tf32 := range []bool{false, true} {
		b.SetTF32(tf32)
		rec.take()
		b.Matmul(out, x, w)
		launches, calls := rec.take()
		require.Empty(t, launches, "no fallback kernel")
		var gemm libRec
		for _, c := range calls {
			if c.name == "cublasGemmStridedBatchedEx" {
				gemm = c
			}
		}
		g := decodeGemm(t, gemm)
		assert.Equal(t, []uintptr{cudaR64F, cudaR64F, cudaR64F, cublasCompute64F}, []uintptr{g.typeA, g.typeB, g.typeC, g.compute})
		assert.Equal(t, uintptr(unsafe.Pointer(&alphaOne64)), gemm.args[6], "alpha is a double")
		assert.Equal(t, uintptr(unsafe.Pointer(&betaZero64)), gemm.args[15], "beta is a double")
	}
	b.SetTF32(false)
	g := lastGemm(t, rec, func() { b.Matmul(o.dense(dtype.F32, 4, 3), o.dense(dtype.F32, 4, 5), o.dense(dtype.F32, 5, 3)) })
	assert.Equal(t, uintptr(cublasCompute32F), g.compute)
	for name, f := range map[string]func(){
		"F64·F32":      func() { b.Matmul(out, x, o.dense(dtype.F32, 5, 3)) },
		"into F32":     func() { b.Matmul(o.dense(dtype.F32, 4, 3), x, w) },
		"F32 into F64": func() { b.Matmul(out, o.dense(dtype.F32, 4, 5), o.dense(dtype.F32, 5, 3)) },
	} {
		launches := launched(rec, f)
		require.Len(t, launches, 1, name)
		assert.Equal(t, kGemmTiled.in(true), launches[0].k, name)
	}
}
