package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/tensor"
)

// f64 returns an F64 tensor of shape holding data, on d, owned by s.
func f64(s *tensor.Scope, d device.Device, data []float64, shape ...int) *tensor.Tensor {
	return tensor.FromSlice(s, d, dtype.F64, data, shape...)
}

func vals64(t *tensor.Tensor) []float64 { return tensor.ToSlice[float64](t) }

// fine returns n float64 values that float32 cannot hold (the 1e-9 parts), of both
// signs, in ±[0.15, 1.4].
func fine(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = (0.15 + 0.125*float64(i%10) + 1e-9*float64(i+1)) * float64(1-2*(i%2))
	}
	return v
}

// requireNear64 asserts got equals want to float64 precision (12 digits): far tighter
// than anything computed through float32 could be.
func requireNear64(t *testing.T, want, got []float64, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		require.InDelta(t, want[i], got[i], 1e-12*(1+math.Abs(want[i])), "%s at %d", msg, i)
	}
}

func mapF(x []float64, f func(float64) float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = f(v)
	}
	return out
}

func sigmoid(v float64) float64 { return 1 / (1 + math.Exp(-v)) }

func geluTanh(v float64) float64 {
	return v / 2 * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
}

// Every op on F64 inputs gives an F64 result equal to the op computed in float64.
func TestF64OpsAgainstFloat64Reference(t *testing.T) {
	d := newCPU(t)
	x := fine(6) // [2, 3]
	y := fine(9)[3:]
	pos := mapF(x, math.Abs)
	un := func(f func(*tensor.Tensor) *tensor.Tensor, data []float64, ref func(float64) float64) func(*tensor.Scope) ([]float64, *tensor.Tensor) {
		return func(s *tensor.Scope) ([]float64, *tensor.Tensor) { return mapF(data, ref), f(f64(s, d, data, 2, 3)) }
	}
	bin := func(f func(a, b *tensor.Tensor) *tensor.Tensor, ref func(a, b float64) float64) func(*tensor.Scope) ([]float64, *tensor.Tensor) {
		return func(s *tensor.Scope) ([]float64, *tensor.Tensor) {
			want := make([]float64, 6)
			for i := range want {
				want[i] = ref(pos[i], y[i%3]) // b is [3], broadcast over rows
			}
			return want, f(f64(s, d, pos, 2, 3), f64(s, d, y[:3], 3))
		}
	}
	cases := map[string]func(s *tensor.Scope) ([]float64, *tensor.Tensor){
		"Neg":      un((*tensor.Tensor).Neg, x, func(v float64) float64 { return -v }),
		"Abs":      un((*tensor.Tensor).Abs, x, math.Abs),
		"Exp":      un((*tensor.Tensor).Exp, x, math.Exp),
		"Log":      un((*tensor.Tensor).Log, pos, math.Log),
		"Sqrt":     un((*tensor.Tensor).Sqrt, pos, math.Sqrt),
		"Tanh":     un((*tensor.Tensor).Tanh, x, math.Tanh),
		"Sigmoid":  un((*tensor.Tensor).Sigmoid, x, sigmoid),
		"Relu":     un((*tensor.Tensor).Relu, x, func(v float64) float64 { return max(v, 0) }),
		"Gelu":     un((*tensor.Tensor).Gelu, x, func(v float64) float64 { return v / 2 * (1 + math.Erf(v/math.Sqrt2)) }),
		"GeluTanh": un((*tensor.Tensor).GeluTanh, x, geluTanh),
		"AddScalar": un(func(t *tensor.Tensor) *tensor.Tensor { return t.AddScalar(0.1) }, x,
			func(v float64) float64 { return v + 0.1 }),
		"MulScalar": un(func(t *tensor.Tensor) *tensor.Tensor { return t.MulScalar(1.0 / 3) }, x,
			func(v float64) float64 { return v * (1.0 / 3) }),
		"PowScalar": un(func(t *tensor.Tensor) *tensor.Tensor { return t.PowScalar(2.5) }, pos,
			func(v float64) float64 { return math.Pow(v, 2.5) }),
		"Cast":    un(func(t *tensor.Tensor) *tensor.Tensor { return t.Cast(dtype.F64).Clone() }, x, func(v float64) float64 { return v }),
		"Add":     bin((*tensor.Tensor).Add, func(a, b float64) float64 { return a + b }),
		"Sub":     bin((*tensor.Tensor).Sub, func(a, b float64) float64 { return a - b }),
		"Mul":     bin((*tensor.Tensor).Mul, func(a, b float64) float64 { return a * b }),
		"Div":     bin((*tensor.Tensor).Div, func(a, b float64) float64 { return a / b }),
		"Pow":     bin((*tensor.Tensor).Pow, math.Pow),
		"Maximum": bin((*tensor.Tensor).Maximum, math.Max),
		"Minimum": bin((*tensor.Tensor).Minimum, math.Min),
		"Sum": func(s *tensor.Scope) ([]float64, *tensor.Tensor) {
			return []float64{x[0] + x[1] + x[2], x[3] + x[4] + x[5]}, f64(s, d, x, 2, 3).Sum(1)
		},
		"Mean": func(s *tensor.Scope) ([]float64, *tensor.Tensor) {
			return []float64{(x[0] + x[3]) / 2, (x[1] + x[4]) / 2, (x[2] + x[5]) / 2}, f64(s, d, x, 2, 3).Mean(0)
		},
		"SumTo": func(s *tensor.Scope) ([]float64, *tensor.Tensor) {
			return []float64{x[0] + x[3], x[1] + x[4], x[2] + x[5]}, f64(s, d, x, 2, 3).SumTo(1, 3)
		},
		"Max": func(s *tensor.Scope) ([]float64, *tensor.Tensor) {
			return []float64{math.Max(x[0], math.Max(x[1], x[2])), math.Max(x[3], math.Max(x[4], x[5]))}, f64(s, d, x, 2, 3).Max(1)
		},
		"MatMul": func(s *tensor.Scope) ([]float64, *tensor.Tensor) {
			// [2, 3] @ [3, 2] (y seen as [3, 2])
			want := make([]float64, 4)
			for i := range 2 {
				for j := range 2 {
					for k := range 3 {
						want[i*2+j] += x[i*3+k] * y[k*2+j]
					}
				}
			}
			return want, f64(s, d, x, 2, 3).MatMul(f64(s, d, y, 3, 2))
		},
		"Linear": func(s *tensor.Scope) ([]float64, *tensor.Tensor) {
			// x [2, 3] · wᵀ with w = y as [2, 3], plus bias
			bias := []float64{0.1, -0.2}
			want := make([]float64, 4)
			for i := range 2 {
				for j := range 2 {
					want[i*2+j] = bias[j]
					for k := range 3 {
						want[i*2+j] += x[i*3+k] * y[j*3+k]
					}
				}
			}
			return want, tensor.Linear(f64(s, d, x, 2, 3), f64(s, d, y, 2, 3), f64(s, d, bias))
		},
		"Softmax": func(s *tensor.Scope) ([]float64, *tensor.Tensor) {
			return softmaxRows(x, 2, 3, false), f64(s, d, x, 2, 3).Softmax(1)
		},
		"LogSoftmax": func(s *tensor.Scope) ([]float64, *tensor.Tensor) {
			return softmaxRows(x, 2, 3, true), f64(s, d, x, 2, 3).LogSoftmax(-1)
		},
		"CrossEntropy": func(s *tensor.Scope) ([]float64, *tensor.Tensor) {
			ls := softmaxRows(x, 2, 3, true)
			return []float64{-(ls[2] + ls[3]) / 2}, tensor.CrossEntropy(f64(s, d, x, 2, 3), tensor.FromSlice(s, d, dtype.I64, []int64{2, 0}))
		},
		"MSE": func(s *tensor.Scope) ([]float64, *tensor.Tensor) {
			m := 0.0
			for i := range x {
				m += (x[i] - y[i]) * (x[i] - y[i])
			}
			return []float64{m / 6}, tensor.MSE(f64(s, d, x, 2, 3), f64(s, d, y, 2, 3))
		},
		"LayerNorm": func(s *tensor.Scope) ([]float64, *tensor.Tensor) {
			w, b := []float64{1.5, -0.5, 2}, []float64{0.25, 0, -1}
			want := make([]float64, 6)
			for r := range 2 {
				row := x[r*3 : r*3+3]
				mu := (row[0] + row[1] + row[2]) / 3
				v := ((row[0]-mu)*(row[0]-mu) + (row[1]-mu)*(row[1]-mu) + (row[2]-mu)*(row[2]-mu)) / 3
				for j := range 3 {
					want[r*3+j] = (row[j]-mu)/math.Sqrt(v+1e-12)*w[j] + b[j]
				}
			}
			return want, tensor.LayerNorm(f64(s, d, x, 2, 3), f64(s, d, w), f64(s, d, b), 1e-12)
		},
		"Embedding": func(s *tensor.Scope) ([]float64, *tensor.Tensor) {
			return []float64{x[3], x[4], x[5], x[0], x[1], x[2]},
				tensor.Embedding(f64(s, d, x, 2, 3), tensor.FromSlice(s, d, dtype.I64, []int64{1, 0}))
		},
		"ConcatStack": func(s *tensor.Scope) ([]float64, *tensor.Tensor) {
			a := f64(s, d, x, 2, 3)
			return append(append([]float64{}, x...), x...), tensor.Stack(0, a, tensor.Concat(1, a.Slice(1, 0, 1), a.Slice(1, 1, 3)))
		},
		"Views": func(s *tensor.Scope) ([]float64, *tensor.Tensor) {
			return []float64{x[0], x[3], x[1], x[4], x[2], x[5]}, f64(s, d, x, 2, 3).T().Contiguous().Reshape(6)
		},
		"To": func(s *tensor.Scope) ([]float64, *tensor.Tensor) {
			return x, f64(s, d, x, 6).To(newSim(t, 64<<20, true))
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := tensor.NewScope()
			want, got := c(s)
			require.Equal(t, dtype.F64, got.DType())
			requireNear64(t, want, vals64(got), name)
			s.Close()
			requireEmpty(t, d)
		})
	}
	// Dropout keeps an element scaled by 1/(1-p) in float64, or zeroes it.
	s := tensor.NewScope(tensor.WithGenerator(tensor.NewGenerator(3)))
	big := fine(400)
	p := 0.3
	out := vals64(f64(s, d, big).Dropout(p))
	kept := 0
	for i, v := range out {
		if v != 0 {
			require.Equal(t, big[i]*(1/(1-p)), v, "element %d", i)
			kept++
		}
	}
	require.InDelta(t, 280, kept, 40)
	s.Close()
	requireEmpty(t, d)
}

// softmaxRows is softmax (or log-softmax) along rows of n in float64.
func softmaxRows(x []float64, rows, n int, log bool) []float64 {
	out := make([]float64, len(x))
	for r := range rows {
		row := x[r*n : (r+1)*n]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, v)
		}
		sum := 0.0
		for _, v := range row {
			sum += math.Exp(v - mx)
		}
		for j, v := range row {
			if log {
				out[r*n+j] = v - mx - math.Log(sum)
			} else {
				out[r*n+j] = math.Exp(v-mx) / sum
			}
		}
	}
	return out
}

// The backward rules compute F64 gradients in float64: closed forms of the elementwise
// families and the products, to float64 precision.
func TestF64GradientsAgainstClosedForms(t *testing.T) {
	d := newCPU(t)
	x := fine(6)
	pos := mapF(x, math.Abs)
	g := fine(12)[6:]
	for _, c := range []struct {
		name string
		in   []float64
		f    func(*tensor.Tensor) *tensor.Tensor
		df   func(v float64) float64
	}{
		{"Exp", x, (*tensor.Tensor).Exp, math.Exp},
		{"Log", pos, (*tensor.Tensor).Log, func(v float64) float64 { return 1 / v }},
		{"Sqrt", pos, (*tensor.Tensor).Sqrt, func(v float64) float64 { return 0.5 / math.Sqrt(v) }},
		{"Tanh", x, (*tensor.Tensor).Tanh, func(v float64) float64 { return 1 - math.Tanh(v)*math.Tanh(v) }},
		{"Sigmoid", x, (*tensor.Tensor).Sigmoid, func(v float64) float64 { return sigmoid(v) * (1 - sigmoid(v)) }},
		{"Gelu", x, (*tensor.Tensor).Gelu, func(v float64) float64 {
			return 0.5*(1+math.Erf(v/math.Sqrt2)) + v*math.Exp(-v*v/2)/math.Sqrt(2*math.Pi)
		}},
		{"PowScalar", pos, func(t *tensor.Tensor) *tensor.Tensor { return t.PowScalar(2.5) }, func(v float64) float64 { return 2.5 * math.Pow(v, 1.5) }},
		{"MulScalar", x, func(t *tensor.Tensor) *tensor.Tensor { return t.MulScalar(0.1) }, func(float64) float64 { return 0.1 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := tensor.NewScope()
			in := f64(s, d, c.in, 2, 3).SetRequiresGrad(true)
			c.f(in).BackwardWith(tensor.BackwardOptions{Grad: f64(s, d, g, 2, 3)})
			require.Equal(t, dtype.F64, in.Grad().DType())
			want := make([]float64, 6)
			for i, v := range c.in {
				want[i] = g[i] * c.df(v)
			}
			requireNear64(t, want, vals64(in.Grad()), c.name)
			s.Close()
			requireEmpty(t, d)
		})
	}

	// Mul and MatMul: each operand's gradient reads the other one.
	s := tensor.NewScope()
	a := f64(s, d, x, 2, 3).SetRequiresGrad(true)
	b := f64(s, d, pos, 3, 2).SetRequiresGrad(true)
	a.MatMul(b).BackwardWith(tensor.BackwardOptions{Grad: f64(s, d, g[:4], 2, 2)})
	da, db := make([]float64, 6), make([]float64, 6)
	for i := range 2 {
		for j := range 2 {
			for k := range 3 {
				da[i*3+k] += g[i*2+j] * pos[k*2+j]
				db[k*2+j] += x[i*3+k] * g[i*2+j]
			}
		}
	}
	requireNear64(t, da, vals64(a.Grad()), "MatMul da")
	requireNear64(t, db, vals64(b.Grad()), "MatMul db")
	m := f64(s, d, x, 6).SetRequiresGrad(true)
	n := f64(s, d, pos, 6).SetRequiresGrad(true)
	m.Mul(n).Sum().Backward()
	requireNear64(t, pos, vals64(m.Grad()), "Mul da")
	requireNear64(t, x, vals64(n.Grad()), "Mul db")
	s.Close()
	requireEmpty(t, d)
}

// Mixed types promote as PyTorch's do: F64 beats every other type, F32 the 16-bit
// floats, F16 with BF16 gives F32, an integer tensor takes the floating one's type.
// The result is computed in the promoted type, and each input's gradient comes back in
// its own type.
func TestPromotionTable(t *testing.T) {
	d := newCPU(t)
	floats := []dtype.DType{dtype.F64, dtype.F32, dtype.F16, dtype.BF16}
	want := map[[2]dtype.DType]dtype.DType{}
	for _, a := range floats {
		for _, b := range floats {
			switch {
			case a == b:
				want[[2]dtype.DType{a, b}] = a
			case a == dtype.F64 || b == dtype.F64:
				want[[2]dtype.DType{a, b}] = dtype.F64
			default:
				want[[2]dtype.DType{a, b}] = dtype.F32
			}
		}
		for _, i := range []dtype.DType{dtype.I32, dtype.I64, dtype.Bool} {
			want[[2]dtype.DType{a, i}] = a
			want[[2]dtype.DType{i, a}] = a
		}
	}
	ops := map[string]func(a, b *tensor.Tensor) *tensor.Tensor{
		"Add":     (*tensor.Tensor).Add,
		"Mul":     (*tensor.Tensor).Mul,
		"Maximum": (*tensor.Tensor).Maximum,
		"Concat":  func(a, b *tensor.Tensor) *tensor.Tensor { return tensor.Concat(0, a, b) },
	}
	for pair, res := range want {
		for name, op := range ops {
			s := tensor.NewScope()
			mk := func(dt dtype.DType, v float64) *tensor.Tensor {
				x := f64(s, d, []float64{v, 1}).Cast(dt).Detach()
				if dt.IsFloat() {
					x.SetRequiresGrad(true)
				}
				return x
			}
			a, b := mk(pair[0], 0.5), mk(pair[1], 1)
			y := op(a, b)
			require.Equal(t, res, y.DType(), "%s(%v, %v)", name, pair[0], pair[1])
			y.Sum().Backward()
			for _, in := range []*tensor.Tensor{a, b} {
				if in.DType().IsFloat() {
					require.Equal(t, in.DType(), in.Grad().DType(), "%s(%v, %v): the gradient of a %v input", name, pair[0], pair[1], in.DType())
				}
			}
			s.Close()
		}
	}
	// The affine parameters take part too: Linear's bias, LayerNorm's weight and bias.
	affine := map[string]func(x, p *tensor.Tensor) *tensor.Tensor{
		"Linear bias":      func(x, p *tensor.Tensor) *tensor.Tensor { return tensor.Linear(x, x, p) },
		"LayerNorm weight": func(x, p *tensor.Tensor) *tensor.Tensor { return tensor.LayerNorm(x, p, nil, 1e-5) },
		"LayerNorm bias":   func(x, p *tensor.Tensor) *tensor.Tensor { return tensor.LayerNorm(x, nil, p, 1e-5) },
	}
	for _, a := range floats {
		for _, b := range floats {
			for name, op := range affine {
				s := tensor.NewScope()
				x := f64(s, d, []float64{0.5, 1, 2, 0.25}, 2, 2).Cast(a).Detach().SetRequiresGrad(true)
				p := f64(s, d, []float64{0.5, 1}).Cast(b).Detach().SetRequiresGrad(true)
				y := op(x, p)
				require.Equal(t, want[[2]dtype.DType{a, b}], y.DType(), "%s: x %v, %v", name, a, b)
				y.Sum().Backward()
				require.Equal(t, a, x.Grad().DType(), "%s: x %v, %v", name, a, b)
				require.Equal(t, b, p.Grad().DType(), "%s: x %v, %v", name, a, b)
				s.Close()
			}
		}
	}

	s := tensor.NewScope()
	// F64 with F32 computes in float64: 0.1 + float32(0.1) keeps both.
	tenth := 0.1
	sum := f64(s, d, []float64{0.1}).Add(f32(s, d, []float32{0.1}))
	require.Equal(t, []float64{tenth + float64(float32(tenth))}, vals64(sum))
	requireOpError(t, tensor.OpAdd, tensor.ErrDType, func() {
		tensor.FromSlice(s, d, dtype.I64, []int64{1}).Add(tensor.FromSlice(s, d, dtype.I32, []int32{1}))
	})
	s.Close()
	requireEmpty(t, d)
}

// Saved statistics and temporaries of F64 ops are F64, and everything is released.
func TestF64MemoryAtNamedMoments(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x := f64(s, d, fine(12), 4, 3).SetRequiresGrad(true)
	y := tensor.LayerNorm(x, nil, nil, 1e-5)
	// x (96 bytes), y (96), and the two saved row statistics of 4 float64s each.
	require.Equal(t, int64(96+96+32+32), requested(t, d))
	y.Sum().Backward()
	require.Equal(t, dtype.F64, x.Grad().DType())
	s.Close()
	requireEmpty(t, d)
}

// The fused steps take F32 or F64 parameters, every tensor of a step in the
// parameter's type; the meta device accounts 8 bytes per F64 element.
func TestF64StepsAndMeta(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	p := f64(s, d, []float64{1, 2}).Detach()
	g := f64(s, d, []float64{0.5, 0.25}).Detach()
	tensor.StepSGD(kernels.SGD{LR: 0.1}, p, g, nil, true)
	require.Equal(t, []float64{1 - 0.1*0.5, 2 - 0.1*0.25}, vals64(p))
	te := requireOpError(t, "StepSGD", tensor.ErrDType, func() { tensor.StepSGD(kernels.SGD{LR: 0.1}, p, g.Cast(dtype.F32), nil, true) })
	require.Contains(t, te.Error(), "of the parameter's type float64")
	h := p.Cast(dtype.F16).Detach()
	te = requireOpError(t, "StepAdam", tensor.ErrDType, func() {
		tensor.StepAdam(kernels.Adam{LR: 0.1, Beta1: 0.9, Beta2: 0.999}, 1, h, h, h, h)
	})
	require.Contains(t, te.Error(), "a step updates F32 or F64 parameters, not float16")
	s.Close()
	requireEmpty(t, d)

	meta := newSim(t, 0, false)
	s = tensor.NewScope()
	x := s.Zeros(meta, dtype.F64, 64, 32)
	w := s.Zeros(meta, dtype.F64, 16, 32)
	y := tensor.Linear(x, w, nil)
	require.Equal(t, dtype.F64, y.DType())
	require.Equal(t, int64(8*(64*32+16*32+64*16)), requested(t, meta))
	s.Close()
	requireEmpty(t, meta)
}
