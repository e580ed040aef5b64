package cuda

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// TestEveryEntryIsInItsPTX: each kernel the Go side launches exists in its family's
// PTX under that name, and nothing else does.
func TestEveryEntryIsInItsPTX(t *testing.T) {
	params := ptxParams(t)
	n := 0
	for _, e := range entries {
		if e.name == "" {
			continue
		}
		n++
		_, ok := params[e.name]
		assert.True(t, ok, "%s is not an entry of gen/%s.ptx", e.name, familyNames[e.fam])
	}
	assert.Len(t, params, n, "every entry of the PTX is launched by some method")
}

// TestVariantsTakeTheSameArguments: every base with a float64 variant has one for each
// of its float32 ones (and the 64-bit index variants beside the 32-bit ones), taking
// the same arguments but for its numbers, doubles where the float32 variant takes
// floats; pointers and structs are the same.
func TestVariantsTakeTheSameArguments(t *testing.T) {
	params := ptxParams(t)
	for i, b := range bases {
		base := kernel(i * variants)
		switch b.form {
		case formOne:
			assert.Equal(t, b.name, entries[base].name)
			continue
		case formIndex:
			assert.Equal(t, []string{b.name + "_i32", b.name + "_i64"}, []string{entries[base].name, entries[base+vWide].name})
			continue
		case formF64:
			assert.Equal(t, []string{"", b.name + "_f64"}, []string{entries[base].name, entries[base.in(true)].name})
			continue
		case formV16:
			k, kv := entries[base].name, entries[base+vV16].name
			assert.Equal(t, []string{b.name + "_f32", b.name + "_f32_v16"}, []string{k, kv})
			assert.Equal(t, params[k], params[kv], "%s and %s", k, kv)
			continue
		case formRegs16:
			// The 16-bit rows' kernels take the float32 ones' arguments: pointers, the
			// sizes, float32 numbers (they compute in float32). The block4 forms have
			// no float32 kernel: theirs is the block form's.
			ref := strings.TrimSuffix(b.name, "_block4")
			if ref != b.name {
				ref += "_block"
			}
			f32 := params[ref+"_f32"]
			require.NotEmpty(t, f32, "%s_f32", ref)
			for _, st := range []kernel{0, vRegsBF16} {
				for _, v := range []kernel{0, vV16} {
					k := entries[base+st+v].name
					require.NotEmpty(t, k, "%s %d", b.name, st+v)
					assert.Equal(t, f32, params[k], "%s and %s_f32", k, b.name)
				}
			}
			continue
		case formWalk16:
			// The 16-bit logits' kernels take the float32 ones' arguments, at each index
			// width.
			for _, st := range []kernel{0, vRegsBF16} {
				for _, w := range []string{"_i32", "_i64"} {
					v := kernel(0)
					if w == "_i64" {
						v = vWide
					}
					k := entries[base+st+v].name
					require.NotEmpty(t, k, "%s %d", b.name, st+v)
					assert.Equal(t, params[b.name+"_f32"+w], params[k], "%s and %s_f32%s", k, b.name, w)
				}
			}
			continue
		case form16:
			// One kernel for each 16-bit type, taking the same arguments.
			f16, bf16 := entries[base].name, entries[base.of16(dtype.BF16)].name
			assert.Equal(t, []string{b.name + "_f16", b.name + "_bf16"}, []string{f16, bf16})
			require.NotEmpty(t, params[f16], f16)
			assert.Equal(t, params[f16], params[bf16], "%s and %s", f16, bf16)
			continue
		case formWords:
			// One kernel for each of float32, F16 and BF16, taking the same arguments.
			for dt, suf := range map[dtype.DType]string{dtype.F16: "_f16", dtype.BF16: "_bf16"} {
				k := entries[base.stored(dt)].name
				assert.Equal(t, b.name+suf, k)
				require.NotEmpty(t, params[entries[base].name], entries[base].name)
				assert.Equal(t, params[entries[base].name], params[k], "%s and %s", k, entries[base].name)
			}
			continue
		case formStore:
			// The F16 and BF16 rows' kernels take the float32 ones' arguments.
			for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
				k := entries[base.stored(dt)].name
				require.NotEmpty(t, k, "%s %v", b.name, dt)
				assert.Equal(t, params[entries[base].name], params[k], "%s and %s", k, entries[base].name)
			}
		}
		widths := []kernel{0}
		if b.form == formWalk {
			widths = append(widths, vWide)
		}
		for _, w := range widths {
			k32, k64 := base+w, base.in(true)+w
			require.NotEmpty(t, entries[k32].name, "%s", b.name)
			require.NotEmpty(t, entries[k64].name, "%s", b.name)
			p32, p64 := params[entries[k32].name], params[entries[k64].name]
			require.Len(t, p64, len(p32), "%s and %s", entries[k32].name, entries[k64].name)
			for j, p := range p32 {
				want := p
				if p.typ == "f32" {
					want = ptxParam{"f64", 8}
				}
				assert.Equal(t, want, p64[j], "%s: parameter %d", entries[k64].name, j)
			}
		}
	}
}

// exercise calls every Backend method on b with operands of several types, layouts
// (strided, broadcast, transposed) and sizes, including the 64-bit index variants' and
// the float64 ones'.
func exercise(b *Backend) {
	var o operands
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16, dtype.F64} {
		x := o.dense(dt, 4, 5)
		tr := o.over(dt, kernels.Layout{Shape: []int{5, 4}, Strides: []int{1, 5}}, 20)
		row := o.dense(dtype.F32, 5)
		dst := o.dense(dt, 4, 5)
		for op := kernels.Neg; op.Valid(); op++ {
			b.Unary(op, dst, x)
			b.UnaryBackward(op, dst, x, o.over(dt, kernels.Layout{Shape: []int{4, 5}, Strides: []int{1, 4}}, 20))
		}
		for op := kernels.Add; op.Valid(); op++ {
			b.Binary(op, dst, x, row)
			b.Binary(op, dst, x, kernels.Scalar(2))
			b.BinaryBackward(op, kernels.ArgA, dst, x, x, row)
			b.BinaryBackward(op, kernels.ArgB, dst, x, kernels.Operand{}, row)
		}
		b.Axpy(dst, 0.5, row)
		xt := o.over(dt, kernels.Layout{Shape: []int{4, 5}, Strides: []int{1, 4}}, 20)
		b.Copy(o.dense(dt, 4, 5), xt) // a transposed view made dense: copy_transpose
		// ... of whole 16-byte words (copy_transpose_words for F32, F16, BF16)
		b.Copy(o.dense(dt, 8, 16), o.over(dt, kernels.Layout{Shape: []int{8, 16}, Strides: []int{1, 8}}, 128))
		_ = b.BinaryCrossEntropy(dst, x, row)
		b.BinaryCrossEntropyWithLogits(dst, x, row, kernels.Operand{})
		b.BinaryCrossEntropyWithLogits(dst, x, xt, row)
		for _, wrt := range []kernels.Arg{kernels.ArgA, kernels.ArgB} {
			b.BinaryCrossEntropyBackward(wrt, dst, x, x, row)
			b.BinaryCrossEntropyWithLogitsBackward(wrt, dst, x, x, row, kernels.Operand{})
			b.BinaryCrossEntropyWithLogitsBackward(wrt, dst, x, xt, row, kernels.Scalar(3))
		}
		b.Addc(kernels.Mul, dst, dst, x, row, 0.5)
		b.Addc(kernels.Div, dst, x, kernels.Scalar(2), row, -1)
		mask := o.dense(dtype.Bool, 4, 5)
		b.DropoutMask(mask, 0.25, 7)
		b.Dropout(dst, x, mask, 0.25)
		b.Copy(o.dense(dtype.I64, 4, 5), x)
		// Contiguous words of 16-bit elements: cast_to_f32 and gelu_tanh.
		b.Copy(o.dense(dtype.F32, 4, 8), o.dense(dt, 4, 8))
		b.Unary(kernels.GeluTanh, o.dense(dt, 4, 8), o.dense(dt, 4, 8))
		b.Fill(dst, 0)
		b.Fill(dst, 1.5)
		b.Sum(o.dense(dt, 1, 5), x)
		b.Mean(o.dense(dt, 4, 1), x)
		b.Sum(o.dense(dt), o.dense(dt, 3, 1<<16))  // pieces
		b.Sum(o.dense(dt), o.dense(dt, 80, 1<<15)) // pieces for a finishing block
		b.Sum(o.dense(dt, 64), o.dense(dt, 1<<16, 64))
		b.Sum(o.dense(dt, 36), o.dense(dt, 256, 36))                            // columns of 4, not of 16 bytes: reduce_cols
		b.Sum(o.dense(dt, 8, 1), o.dense(dt, 8, 100))                           // a warp a row
		b.Sum(o.dense(dt, 8, 1), o.dense(dt, 8, 64))                            // 16-bit rows of words: sum_rows
		b.Max(o.dense(dt, 8, 1), o.dense(dtype.I64, 8, 1), o.dense(dt, 8, 100)) // a warp a row
		b.Max(o.dense(dt, 8, 1), o.dense(dtype.I64, 8, 1), o.dense(dt, 8, 64))  // 16-bit rows of words: max_rows
		idx := o.dense(dtype.I64, 4, 1)
		b.Max(o.dense(dt, 4, 1), idx, x)
		b.Max(kernels.Operand{}, idx, x)
		b.MaxBackward(o.dense(dt, 4, 5), o.dense(dt, 4, 1), idx)
		b.Matmul(o.dense(dt, 4, 4), x, tr)
		b.Matmul(o.dense(dtype.F32, 4, 4), x, tr)
		b.Matmul(o.dense(dt, 2, 3, 4, 4), o.dense(dtype.F32, 2, 3, 4, 5), tr) // mixed types: the fallback
		b.Unscale(x, 0.5, o.dense(dtype.F32))
		b.UnscaleMulti([]kernels.Operand{x, tr, o.dense(dt, 3000)}, 0.5, o.dense(dtype.F32))
		b.NonFinite(x)
		b.MSE(o.dense(dt), o.dense(dtype.F32, 20), o.dense(dtype.F32, 20))
		b.MSEBackward(o.dense(dtype.F32, 20), kernels.Operand{}, o.dense(dtype.F32, 20), o.dense(dtype.F32, 20), o.dense(dt))
	}
	for _, ft := range []dtype.DType{dtype.F32, dtype.F64} {
		// A walk with offsets past 2³¹: the 64-bit variants.
		big := o.over(ft, kernels.Layout{Shape: []int{2, 3}, Strides: []int{1 << 31, 1}}, 1<<32)
		b.Unary(kernels.Exp, o.dense(ft, 2, 3), big)
		b.Copy(o.dense(dtype.F16, 2, 3), big)
		b.Fill(big, 2) // a dst with offsets past 2³¹
		b.UnaryBackward(kernels.Exp, big, big, big)
		b.Binary(kernels.Mul, big, big, kernels.Scalar(3))
		b.BinaryBackward(kernels.Mul, kernels.ArgA, big, big, big, big)
		b.Axpy(big, 2, big)
		_ = b.BinaryCrossEntropy(big, big, big)
		b.BinaryCrossEntropyBackward(kernels.ArgA, big, big, big, big)
		b.BinaryCrossEntropyWithLogits(big, big, big, big)
		b.BinaryCrossEntropyWithLogitsBackward(kernels.ArgA, big, big, big, big, big)
		b.Addc(kernels.Div, big, big, big, big, 0.25)
		b.Dropout(big, big, o.over(dtype.Bool, big.Layout, 1<<32), 0.5)
		b.Unscale(big, 0.5, o.dense(dtype.F32))
		b.NonFinite(big)
		// Rows of an odd length: a thread an element (16-byte words want whole words).
		wide := o.dense(ft, 8, 1<<28+1)
		b.CrossEntropyBackward(wide, wide, o.dense(ft, 9), o.dense(dtype.I64, 8), o.dense(dtype.F32), 8, 1<<28+1, -100)
		// Rows for a warp and a block in registers, 16 bytes a load or not (offset by
		// one element), and for a block reading from memory.
		for _, n := range []int{10, 1024, 1501, 5000, 9000} {
			x := o.dense(ft, 8, n)
			if n == 1024 {
				off := o.over(ft, kernels.Layout{Shape: []int{8, n}, Strides: []int{n, 1}, Offset: 1}, int64(8*n+1))
				b.Softmax(off, x, 8, n, 1)
				b.LayerNormBackward(off, kernels.Operand{}, kernels.Operand{}, x, x, o.dense(ft, 8), o.dense(ft, 8), kernels.Operand{}, 8, n)
			}
			b.Softmax(x, x, 8, n, 1)
			b.LogSoftmax(x, x, 2, n, 4)
			b.SoftmaxBackward(x, x, x, 8, n, 1)
			b.LogSoftmaxBackward(x, x, x, 2, n, 4)
			w, mean := o.dense(ft, n), o.dense(ft, 8)
			b.LayerNorm(x, mean, mean, x, w, w, 8, n, 1e-5)
			b.LayerNorm(x, mean, mean, x, kernels.Operand{}, kernels.Operand{}, 8, n, 1e-5)
			b.LayerNormBackward(x, w, w, x, x, mean, mean, w, 8, n)
			lse, labels := o.dense(ft, 9), o.dense(dtype.I64, 8)
			_ = b.CrossEntropy(o.dense(dtype.BF16), lse, x, labels, 8, n, -100)
			b.CrossEntropyBackward(x, x, lse, labels, o.dense(dtype.F16), 8, n, -100)
			_ = b.Embedding(o.dense(ft, 8, n), x, labels, n)
			_ = b.EmbeddingBackward(x, o.dense(ft, 8, n), labels, n)
			// Enough indices for the sort's steps across blocks, and for keys beyond the
			// scratch (a block of the allocator).
			_ = b.EmbeddingBackward(x, o.dense(ft, 1500, n), o.dense(dtype.I64, 1500), n)
			_ = b.EmbeddingBackward(x, o.dense(ft, 600000, n), o.dense(dtype.I64, 600000), n)
		}
		x := o.dense(ft, 4096, 1024)
		b.LayerNormBackward(kernels.Operand{}, o.dense(ft, 1024), kernels.Operand{}, x, x, o.dense(ft, 4096), o.dense(ft, 4096), kernels.Operand{}, 4096, 1024)
		b.MSE(o.dense(dtype.F32), x, x)
		b.MSEBackward(x, kernels.Operand{}, x, x, o.dense(dtype.F16))
		p := o.dense(ft, 10)
		b.SGD(kernels.SGD{LR: 0.1}, p, p, kernels.Operand{}, true)
		b.SGD(kernels.SGD{LR: 0.1, Momentum: 0.9, Nesterov: true}, p, p, p, false)
		b.Adam(kernels.Adam{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}, 3, p, p, p, p)
		b.Adam(kernels.Adam{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Decoupled: true}, 1, p, p, p, p)
		ps := []kernels.Operand{p, o.dense(ft, 5000), o.dense(ft, 0)}
		b.SGDMulti(kernels.SGD{LR: 0.1, Momentum: 0.9}, ps, ps, ps, []bool{true, false, true})
		b.AdamMulti(kernels.Adam{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}, []int{1, 2, 3}, ps, ps, ps, ps)
		b.AdamMultiCapturable(kernels.Adam{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Decoupled: true},
			o.dense(dtype.F64), o.dense(dtype.F64, 4), []int{2, 0, 3}, ps, ps, ps, ps)
	}
	// Softmax and layer norm over F16 and BF16 rows (float32 statistics), in registers
	// 16 bytes a load (n % 8 == 0) or not (a warp, the block4 form up to 4096, the block
	// form beyond), and from memory.
	for _, st := range []dtype.DType{dtype.F16, dtype.BF16} {
		for _, n := range []int{10, 1024, 1500, 4096, 5000, 5004, 9000} {
			x, w, mean := o.dense(st, 8, n), o.dense(st, n), o.dense(dtype.F32, 8)
			if n == 1024 {
				off := o.over(st, kernels.Layout{Shape: []int{8, n}, Strides: []int{n, 1}, Offset: 1}, int64(8*n+1))
				b.Softmax(off, x, 8, n, 1)
			}
			b.Softmax(x, x, 8, n, 1)
			b.LogSoftmax(x, x, 2, n, 4)
			b.SoftmaxBackward(x, x, x, 8, n, 1)
			b.LogSoftmaxBackward(x, x, x, 2, n, 4)
			b.LayerNorm(x, mean, mean, x, w, w, 8, n, 1e-5)
			dw := o.dense(dtype.F32, n)
			b.LayerNormBackward(x, dw, dw, x, x, mean, mean, w, 8, n)
		}
		// Cross-entropy over 16-bit logits (lse F32): rows for a warp and for a block in
		// registers, 16 bytes a load (n % 8 == 0) or not, from memory, more rows than the
		// forward's blocks take at once, a walk past 2³¹.
		for _, sz := range [][2]int{{8, 10}, {8, 1024}, {8, 1500}, {8, 4096}, {8, 5000}, {8, 5004}, {8, 9000}, {20000, 10}} {
			x, lse, labels := o.dense(st, sz[0], sz[1]), o.dense(dtype.F32, sz[0]+1), o.dense(dtype.I64, sz[0])
			_ = b.CrossEntropy(o.dense(dtype.F32), lse, x, labels, sz[0], sz[1], -100)
			b.CrossEntropyBackward(x, x, lse, labels, o.dense(st), sz[0], sz[1], -100)
		}
		wide := o.dense(st, 8, 1<<28+1)
		b.CrossEntropyBackward(wide, wide, o.dense(dtype.F32, 9), o.dense(dtype.I64, 8), o.dense(dtype.F32), 8, 1<<28+1, -100)
		x := o.dense(st, 4096, 1024)
		b.LayerNormBackward(kernels.Operand{}, o.dense(dtype.F32, 1024), kernels.Operand{}, x, x, o.dense(dtype.F32, 4096), o.dense(dtype.F32, 4096), kernels.Operand{}, 4096, 1024)
	}
	exerciseCompare(b, &o) // compare_test.go
}

// TestLaunchesMatchPTX: every launch any method makes passes as many arguments as the
// kernel has parameters, each of the parameter's size (a struct the size nvcc gave
// it), with blocks of the kernels' BLOCK threads and a grid the GPU accepts. A
// mismatch here would read garbage on the GPU.
func TestLaunchesMatchPTX(t *testing.T) {
	params := ptxParams(t)
	b, rec := newRecording(t)
	exercise(b)
	launches, calls := rec.take()
	seen := map[kernel]bool{}
	for i, l := range launches {
		e := entries[l.k]
		var want, got []int
		for _, p := range params[e.name] {
			want = append(want, p.size)
		}
		for _, a := range l.args {
			got = append(got, a.size)
		}
		require.Equal(t, want, got, "launch %d of %s: argument sizes", i, e.name)
		assert.Equal(t, uint32(block), l.cfg.Block.X, e.name)
		g := l.cfg.Grid
		assert.True(t, g.X >= 1 && g.Y <= 65535 && g.Z <= 65535, "%s: grid %v", e.name, g)
		seen[l.k] = true
	}
	for k, e := range entries {
		assert.True(t, e.name == "" || seen[kernel(k)], "exercise never launches %s", e.name)
	}
	// cuBLAS calls have their C signatures' argument counts.
	arity := map[string]int{"cublasCreate_v2": 1, "cublasSetMathMode": 2, "cublasSetStream_v2": 2, "cublasSetWorkspace_v2": 3, "cublasGemmStridedBatchedEx": 23}
	for _, c := range calls {
		require.Contains(t, arity, c.name)
		assert.Len(t, c.args, arity[c.name], c.name)
	}
	assert.NotEmpty(t, calls, "some products ran on cuBLAS")
	t.Logf("%d launches of %d kernels, %d cuBLAS calls", len(launches), len(seen), len(calls))
}

// TestMisuseNamesTheKernel: misuse panics before anything is launched, with a message
// naming the kernel, as kernels/cpu does.
func TestMisuseNamesTheKernel(t *testing.T) {
	b, rec := newRecording(t)
	var o operands
	x := o.dense(dtype.F32, 4, 5)
	for name, f := range map[string]func(){
		"does not broadcast": func() { b.Binary(kernels.Add, x, x, o.dense(dtype.F32, 3)) },
		"repeats elements": func() {
			b.Unary(kernels.Exp, o.over(dtype.F32, kernels.Layout{Shape: []int{4, 5}, Strides: []int{0, 1}}, 5), x)
		},
		"must be float64":    func() { b.Unary(kernels.Exp, o.dense(dtype.I32, 4, 5), x) },
		"reaches element":    func() { b.Copy(o.over(dtype.F32, kernels.Contiguous(4, 5), 19), x) },
		"row operand":        func() { b.Softmax(o.dense(dtype.F16, 4, 5), x, 4, 5, 1) },
		"contiguous float64": func() { b.Softmax(x, o.dense(dtype.F64, 4, 5), 4, 5, 1) },
		"has 20 elements":    func() { b.Softmax(x, x, 4, 6, 1) },
		"outside [0, 1]":     func() { b.DropoutMask(o.dense(dtype.Bool, 3), 1.5, 1) },
		"do not multiply":    func() { b.Matmul(o.dense(dtype.F32, 4, 4), x, x) },
		"reduces nothing":    func() { b.Max(o.dense(dtype.F32, 4, 1), o.dense(dtype.I64, 4, 1), o.dense(dtype.F32, 4, 0)) },
		"not whole rows":     func() { _ = b.Embedding(o.dense(dtype.F32, 2, 3), o.dense(dtype.F32, 7), o.dense(dtype.I64, 2), 3) },
		"numbers start at 1": func() { b.Adam(kernels.Adam{}, 0, x, x, x, x) },
		"unknown":            func() { b.Unary(kernels.UnaryOp(99), x, x) },
		"momentum 0.9 with":  func() { b.SGD(kernels.SGD{Momentum: 0.9}, x, x, kernels.Operand{}, false) },
		"for parameter 1": func() {
			b.SGDMulti(kernels.SGD{Momentum: 0.9}, []kernels.Operand{x, x}, []kernels.Operand{x, x}, []kernels.Operand{x, {}}, []bool{false, false})
		},
		"step number 0 of parameter 1": func() {
			b.AdamMulti(kernels.Adam{}, []int{1, 0}, []kernels.Operand{x, x}, []kernels.Operand{x, x}, []kernels.Operand{x, x}, []kernels.Operand{x, x})
		},
		"lists (steps, g, m, v)": func() {
			b.AdamMulti(kernels.Adam{}, []int{1}, []kernels.Operand{x}, []kernels.Operand{x}, []kernels.Operand{x}, nil)
		},
		"parameters 0 and 1 share step count 1": func() {
			b.AdamMultiCapturable(kernels.Adam{}, o.dense(dtype.F64), o.dense(dtype.F64, 2), []int{1, 1}, []kernels.Operand{x, x}, []kernels.Operand{x, x}, []kernels.Operand{x, x}, []kernels.Operand{x, x})
		},
		"slot 2 of parameter 0 is outside the 2 step counts": func() {
			b.AdamMultiCapturable(kernels.Adam{}, o.dense(dtype.F64), o.dense(dtype.F64, 2), []int{2}, []kernels.Operand{x}, []kernels.Operand{x}, []kernels.Operand{x}, []kernels.Operand{x})
		},
		"unscale_multi: output must be": func() {
			b.UnscaleMulti([]kernels.Operand{x, o.dense(dtype.I64, 3)}, 0.5, o.dense(dtype.F32))
		},
		"unknown argument 7": func() { b.BinaryCrossEntropyBackward(kernels.Arg(7), x, x, x, x) },
		"takes mul or div":   func() { b.Addc(kernels.Add, x, x, x, x, 1) },
		"output must be":     func() { _ = b.BinaryCrossEntropy(o.dense(dtype.I64, 4, 5), x, x) },
	} {
		t.Run(name, func(t *testing.T) { requirePanicNaming(t, name, f) })
	}
	l, c := rec.take()
	assert.Empty(t, l, "misuse launches nothing")
	assert.Empty(t, c)
}
