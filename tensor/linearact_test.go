package tensor_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/amp"
	"github.com/subletml/sublet/device"
	"github.com/subletml/sublet/device/cpu"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/tensor"
	"github.com/subletml/sublet/tensor/tensortest"
)

// linearActRun is one forward and backward of a Linear and its ReLU, fused
// (tensor.LinearActivation) or as the two ops, each in a layer's child scope as
// nn.Sequential runs them.
type linearActRun struct {
	out, dx, dw, db []float64
	kept            int64 // bytes held after the forward beyond the inputs: the result and what the graph saved
	fwdPeak         int64 // most bytes requested during the forward beyond the inputs
	bwdPeak         int64 // most bytes requested during the backward beyond what it started with
}

// linearActCase is x [rows..., in] through a Linear(in→out) with or without a bias.
type linearActCase struct {
	rows    []int
	in, out int
	bias    bool
}

func (c linearActCase) String() string {
	return fmt.Sprintf("x %v×%d → %d bias %v", c.rows, c.in, c.out, c.bias)
}

var linearActCases = []linearActCase{
	{[]int{6}, 24, 16, true},
	{[]int{2, 3}, 24, 16, false},
	{[]int{5}, 7, 3, true}, // odd widths
}

// values returns n values in about [-1, 1], fixed by seed.
func linearActValues(n, seed int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.Sin(float64(i*7+seed*13)) * 1.1
	}
	return v
}

func runLinearAct(t *testing.T, d device.Device, dt dtype.DType, c linearActCase, fused bool, wrap func(*tensor.Scope) *tensor.Scope) linearActRun {
	t.Helper()
	s := tensor.NewScope()
	defer s.Close()
	rows := 1
	for _, r := range c.rows {
		rows *= r
	}
	x := tensor.FromSlice(s, d, dtype.F64, linearActValues(rows*c.in, 1), append(append([]int(nil), c.rows...), c.in)...).Cast(dt).Detach().SetRequiresGrad(true)
	w := tensor.FromSlice(s, d, dtype.F64, linearActValues(c.out*c.in, 2), c.out, c.in).Cast(dt).Detach().SetRequiresGrad(true)
	var b *tensor.Tensor
	if c.bias {
		b = tensor.FromSlice(s, d, dtype.F64, linearActValues(c.out, 3), c.out).Cast(dt).Detach().SetRequiresGrad(true)
	}
	seed := tensor.FromSlice(s, d, dtype.F64, linearActValues(rows*c.out, 4), append(append([]int(nil), c.rows...), c.out)...)
	base := requested(t, d)
	allocator(t, d).ResetPeakStats()
	fwd := s
	if wrap != nil {
		fwd = wrap(s)
	}
	y := tensor.Layer(fwd.Bind(x), func(h *tensor.Tensor) *tensor.Tensor {
		if fused {
			return tensor.LinearActivation(h, w, b, tensor.ActRelu)
		}
		return tensor.Linear(h, w, b).Relu()
	})
	if fwd != s {
		fwd.Keep(y)
		fwd.Close()
	}
	var r linearActRun
	r.kept = requested(t, d) - base
	r.fwdPeak = tensortest.PeakRequested(t, d) - base
	loss := y.Mul(seed.Cast(y.DType())).Sum()
	start := requested(t, d)
	allocator(t, d).ResetPeakStats()
	loss.Backward()
	r.bwdPeak = tensortest.PeakRequested(t, d) - start
	f64 := func(t *tensor.Tensor) []float64 { return tensor.ToSlice[float64](s.Bind(t).Cast(dtype.F64)) }
	r.out, r.dx, r.dw = f64(y), f64(x.Grad()), f64(w.Grad())
	if b != nil {
		r.db = f64(b.Grad())
	}
	return r
}

// LinearActivation computes what Linear then Relu compute, with the same gradients,
// keeps the same bytes after the forward and peaks no higher in the backward: bit for
// bit where the backend folds nothing (cpu, sim), within the products' rounding on
// cuda, where cuBLASLt's epilogue applies the ReLU.
func TestLinearActivationMatchesTheTwoOps(t *testing.T) {
	for _, dd := range dataDevices(t) {
		for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16, dtype.F64} {
			for _, c := range linearActCases {
				t.Run(fmt.Sprintf("%s/%v/%v", dd.Name, dt, c), func(t *testing.T) {
					two := runLinearAct(t, dd.Device, dt, c, false, nil)
					one := runLinearAct(t, dd.Device, dt, c, true, nil)
					requireLinearActClose(t, dd.Name, dt, two, one)
					require.Equal(t, two.kept, one.kept, "after the forward: the result and the same saved tensors")
					require.LessOrEqual(t, one.fwdPeak, two.fwdPeak)
					require.Equal(t, two.bwdPeak, one.bwdPeak, "the backward runs the two ops' rules")
					requireEmpty(t, dd.Device)
				})
			}
		}
	}
}

// requireLinearActClose compares the fused run with the two ops': identical where the
// backend folds nothing, within dt's rounding of results of about 1 on cuda.
func requireLinearActClose(t *testing.T, dev string, dt dtype.DType, want, got linearActRun) {
	t.Helper()
	if dev != "cuda" {
		require.Equal(t, [][]float64{want.out, want.dx, want.dw, want.db}, [][]float64{got.out, got.dx, got.dw, got.db})
		return
	}
	tol := map[dtype.DType]float64{dtype.F64: 1e-12, dtype.F32: 1e-4, dtype.F16: 1e-2, dtype.BF16: 6e-2}[dt]
	for _, p := range []struct {
		what      string
		want, got []float64
	}{{"result", want.out, got.out}, {"dx", want.dx, got.dx}, {"dw", want.dw, got.dw}, {"db", want.db, got.db}} {
		require.Len(t, p.got, len(p.want), p.what)
		for i := range p.want {
			require.InDelta(t, p.want[i], p.got[i], tol*max(1, math.Abs(p.want[i])), "%s[%d]", p.what, i)
		}
	}
}

// Under autocast the fused op is a Linear for the policy: F16 (BF16) inputs, result and
// saved tensors, as Linear then Relu, on every data device.
func TestLinearActivationUnderAutocast(t *testing.T) {
	for _, dd := range dataDevices(t) {
		for _, low := range []dtype.DType{dtype.F16, dtype.BF16} {
			t.Run(fmt.Sprintf("%s/%v", dd.Name, low), func(t *testing.T) {
				wrap := func(s *tensor.Scope) *tensor.Scope {
					ac, err := amp.Autocast(s, low)
					require.NoError(t, err)
					return ac
				}
				c := linearActCases[0]
				two := runLinearAct(t, dd.Device, dtype.F32, c, false, wrap)
				one := runLinearAct(t, dd.Device, dtype.F32, c, true, wrap)
				requireLinearActClose(t, dd.Name, low, two, one)
				require.Equal(t, two.kept, one.kept)
				require.Equal(t, two.bwdPeak, one.bwdPeak)
				requireEmpty(t, dd.Device)
			})
		}
	}
}

func TestLinearActivationResultType(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	ac, err := amp.Autocast(s, dtype.BF16)
	require.NoError(t, err)
	x := ac.Ones(d, dtype.F32, 2, 3)
	w := ac.Ones(d, dtype.F32, 4, 3)
	require.Equal(t, dtype.BF16, tensor.LinearActivation(x, w, nil, tensor.ActRelu).DType())
	ac.Close()
	s.Close()
	requireEmpty(t, d)
}

// Bad input names the op and what to give.
func TestLinearActivationErrors(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope()
	x, w := s.Ones(d, dtype.F32, 2, 3), s.Ones(d, dtype.F32, 4, 3)
	requireOpError(t, "LinearActivation", tensor.ErrShape, func() { tensor.LinearActivation(x, w, nil, 0) })
	requireOpError(t, "LinearActivation", tensor.ErrShape, func() { tensor.LinearActivation(x, w, nil, tensor.ActRelu+1) })
	requireOpError(t, tensor.OpLinearRelu, tensor.ErrShape, func() { tensor.LinearActivation(x, w.T(), nil, tensor.ActRelu) })
	requireOpError(t, tensor.OpLinearRelu, tensor.ErrShape, func() {
		tensor.LinearActivation(x, w, s.Ones(d, dtype.F32, 3), tensor.ActRelu)
	})
	s.Close()
	requireEmpty(t, d)
}

// The ReLU is applied in place of the product: the forward makes the result and
// nothing else, where Linear then Relu hold the product and the result at their peak.
func TestLinearActivationNoGradMakesOnlyTheResult(t *testing.T) {
	d := newCPU(t)
	s := tensor.NewScope(tensor.NoGrad())
	x, w := s.Ones(d, dtype.F32, 8, 16), s.Ones(d, dtype.F32, 32, 16)
	base := requested(t, d)
	allocator(t, d).ResetPeakStats()
	y := tensor.LinearActivation(x, w, nil, tensor.ActRelu)
	require.Equal(t, y.Bytes(), tensortest.PeakRequested(t, d)-base)
	require.Equal(t, int64(8*32*4), y.Bytes())
	require.False(t, y.RequiresGrad())
	allocator(t, d).ResetPeakStats()
	two := tensor.Linear(x, w, nil).Relu()
	require.Equal(t, 2*two.Bytes(), tensortest.PeakRequested(t, d)-base-y.Bytes(), "the two ops: the product and the result")
	s.Close()
	requireEmpty(t, d)
}

// A Linear and its ReLU in one op: the values of Linear then Relu, and the same two
// nodes for backward (the result's gradient reaches the Linear through the ReLU's).
func ExampleLinearActivation() {
	dev, _ := cpu.New(cpu.Options{})
	s := tensor.NewScope()
	x := tensor.FromSlice(s, dev, dtype.F32, []float32{1, 2, -1, 0.5}, 2, 2)
	w := tensor.FromSlice(s, dev, dtype.F32, []float32{1, 1, 1, -1, 0, 2}, 3, 2).SetRequiresGrad(true)
	b := tensor.FromSlice(s, dev, dtype.F32, []float32{0, -1, 0.5}, 3)
	y := tensor.LinearActivation(x, w, b, tensor.ActRelu)
	fmt.Println(tensor.ToSlice[float32](y))
	fmt.Println(tensor.ToSlice[float32](tensor.Linear(x, w, b).Relu()))
	y.Sum().Backward()
	fmt.Println(tensor.ToSlice[float32](w.Grad()))
	s.Close()
	w.Release()
	// Output:
	// [3 0 4.5 0 0 1.5]
	// [3 0 4.5 0 0 1.5]
	// [1 2 0 0 0 2.5]
}

// A NaN in x makes its row of x·wᵀ + bias NaN: ReLU keeps it in anomaly mode (which
// does not fold) and wherever the backend does not fold, and may give 0 where
// cuBLASLt's epilogue applies it (kernels.ActivationMatmul).
func TestLinearActivationNaN(t *testing.T) {
	for _, dd := range dataDevices(t) {
		for _, anomaly := range []bool{false, true} {
			s := tensor.NewScope(tensor.WithAnomaly(anomaly), tensor.NoGrad())
			xv := linearActValues(6*24, 1)
			xv[0*24+3], xv[3*24+20] = math.NaN(), math.NaN() // rows 0 and 3
			x := tensor.FromSlice(s, dd.Device, dtype.F64, xv, 6, 24).Cast(dtype.F32)
			w := tensor.FromSlice(s, dd.Device, dtype.F64, linearActValues(16*24, 2), 16, 24).Cast(dtype.F32)
			b := tensor.FromSlice(s, dd.Device, dtype.F64, linearActValues(16, 3), 16).Cast(dtype.F32)
			got := tensor.ToSlice[float32](tensor.LinearActivation(x, w, b, tensor.ActRelu))
			xs := tensor.ToSlice[float32](x)
			zeros := 0
			for i, v := range got {
				row := xs[i/16*24 : i/16*24+24]
				nanRow := slices.ContainsFunc(row, func(v float32) bool { return v != v })
				switch {
				case !nanRow:
					require.False(t, v != v, "element %d", i)
				case v == v && dd.Name == "cuda" && !anomaly:
					require.Zero(t, v, "element %d: NaN or 0", i)
					zeros++
				default:
					require.True(t, v != v, "%s anomaly %v: element %d of a NaN row is %v", dd.Name, anomaly, i, v)
				}
			}
			t.Logf("%s anomaly %v: NaN rows' elements that came out 0: %d", dd.Name, anomaly, zeros)
			s.Close()
			requireEmpty(t, dd.Device)
		}
	}
}
