package kernelstest

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// multiTensors is how many tensors a multi-tensor case updates: more than one launch's
// table holds on a GPU (kernels/cuda takes 56 parameters or 128 gradients a launch),
// so that the list is cut into several.
const multiTensors = 150

// multiSize is tensor i's element count: empty, odd and even lengths, one below and
// above a GPU block's 256 threads and a chunk's 2048 elements, and one tensor of many
// chunks.
func multiSize(i int) int {
	if i == 7 {
		return 3*2048 + 5
	}
	return []int{0, 1, 3, 17, 255, 256, 257, 64, 2047, 2049, 9, 100}[i%12]
}

// multiTypes are the parameter types of a multi-tensor list: all F32, all F64, or
// mixed (every fifth tensor F64), which a GPU backend splits by compute type.
var multiTypes = map[string]func(i int) dtype.DType{
	"F32": func(int) dtype.DType { return dtype.F32 },
	"F64": func(int) dtype.DType { return dtype.F64 },
	"mixed": func(i int) dtype.DType {
		return []dtype.DType{dtype.F32, dtype.F32, dtype.F32, dtype.F64, dtype.F32}[i%5]
	},
}

// sameAsOneByOne runs the multi-tensor call multi and the single-tensor calls one on
// the same operands, each from the same inputs, and requires every block to come out
// with the same bytes: the multi-tensor kernels give each element the bits of the
// single-tensor ones, and write nothing else.
func (s *suite) sameAsOneByOne(t *testing.T, what string, bufs []*buf, multi, one kernelCall) {
	t.Helper()
	got := exec(t, s.tg, bufs, multi)
	require.NoError(t, s.check(), what)
	want := exec(t, s.tg, bufs, one)
	require.NoError(t, s.check(), what)
	for i := range bufs {
		require.Equal(t, want[i], got[i], "%s: operand %d (%v %v)", what, i, bufs[i].dt, bufs[i].l.Shape)
	}
}

// testMulti: SGDMulti, AdamMulti and UnscaleMulti against the single-tensor kernels
// they stand for, bit for bit, over lists longer than one launch's table with empty,
// odd and many-chunk tensors, in F32, F64 and a mix of both.
func testMulti(t *testing.T, s *suite) {
	for _, name := range []string{"F32", "F64", "mixed"} {
		typ := multiTypes[name]
		param := func(i int, lo, hi float64) *buf { return row(typ(i), multiSize(i), s.uniform(lo, hi)) }
		for _, c := range []kernels.SGD{
			{LR: 0.1, WeightDecay: 0.01},
			{LR: 0.05, Momentum: 0.9, Dampening: 0.1, WeightDecay: 0.001},
			{LR: 0.05, Momentum: 0.9, Nesterov: true},
		} {
			const k = multiTensors
			bufs := make([]*buf, 3*k)
			first := make([]bool, k)
			for i := range k {
				bufs[i], bufs[k+i], bufs[2*k+i] = param(i, -1, 1), param(i, -1, 1), param(i, -1, 1)
				if c.Momentum == 0 {
					bufs[2*k+i] = absent()
				}
				first[i] = i%3 == 0
			}
			multi := func(be kernels.Backend, o []kernels.Operand) { be.SGDMulti(c, o[:k], o[k:2*k], o[2*k:], first) }
			one := func(be kernels.Backend, o []kernels.Operand) {
				for i := range k {
					be.SGD(c, o[i], o[k+i], o[2*k+i], first[i])
				}
			}
			s.sameAsOneByOne(t, fmt.Sprintf("SGDMulti %s %+v", name, c), bufs, multi, one)
		}
		for _, c := range []kernels.Adam{
			{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
			{LR: 1e-2, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, WeightDecay: 0.1},
			{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Decoupled: true},
		} {
			const k = multiTensors
			bufs := make([]*buf, 4*k)
			steps := make([]int, k)
			for i := range k {
				bufs[i], bufs[k+i] = param(i, -1, 1), param(i, -1, 1)
				bufs[2*k+i], bufs[3*k+i] = param(i, -0.1, 0.1), param(i, 0, 0.01)
				steps[i] = 1 + i%4 // parameters that missed steps count fewer
			}
			multi := func(be kernels.Backend, o []kernels.Operand) {
				be.AdamMulti(c, steps, o[:k], o[k:2*k], o[2*k:3*k], o[3*k:])
			}
			one := func(be kernels.Backend, o []kernels.Operand) {
				for i := range k {
					be.Adam(c, steps[i], o[i], o[k+i], o[2*k+i], o[3*k+i])
				}
			}
			s.sameAsOneByOne(t, fmt.Sprintf("AdamMulti %s %+v", name, c), bufs, multi, one)
			testAdamCapturable(t, s, name, c, bufs)
		}
	}
	testUnscaleMulti(t, s)
	testMultiMisuse(t, s)
}

// testAdamCapturable: AdamMultiCapturable on the parameters, gradients and moments of
// an AdamMulti case (bufs) gives every element the bits of Adam one by one with the
// rate and the counts it read, and leaves each count one higher: counts in permuted
// slots among unused ones, from 0 to past float32's 2^24.
func testAdamCapturable(t *testing.T, s *suite, name string, c kernels.Adam, bufs []*buf) {
	k := len(bufs) / 4
	const lr, unused = 3e-3, 7
	counts := []float64{0, 1, 2, 5, 1 << 24, 999}
	slot := make([]int, k)
	for i := range k {
		slot[i] = (i*37 + 5) % (k + unused) // distinct: 37 is prime to k+unused
	}
	all := append(append([]*buf(nil), bufs...), row(dtype.F64, 1, func(int) float64 { return lr }),
		row(dtype.F64, k+unused, func(j int) float64 { return counts[j%len(counts)] }))
	multi := func(be kernels.Backend, o []kernels.Operand) {
		be.AdamMultiCapturable(c, o[4*k], o[4*k+1], slot, o[:k], o[k:2*k], o[2*k:3*k], o[3*k:4*k])
	}
	one := func(be kernels.Backend, o []kernels.Operand) {
		cl := c
		cl.LR = lr
		for i := range k {
			n := counts[slot[i]%len(counts)]
			be.Adam(cl, int(n)+1, o[i], o[k+i], o[2*k+i], o[3*k+i])
			count := o[4*k+1]
			count.Layout = kernels.Layout{Offset: slot[i]}
			be.Fill(count, n+1)
		}
	}
	s.sameAsOneByOne(t, fmt.Sprintf("AdamMultiCapturable %s %+v", name, c), all, multi, one)
}

// testUnscaleMulti: gradients of every float type, most contiguous, some transposed
// (a GPU backend's fallback), with an Inf, a NaN or none among them, and the flag set
// before or not.
func testUnscaleMulti(t *testing.T, s *suite) {
	const k = 2*128 + 11
	types := []dtype.DType{dtype.F32, dtype.F32, dtype.F16, dtype.F64, dtype.BF16, dtype.F32}
	for _, bad := range []float64{0, math.Inf(-1), math.NaN()} {
		for _, before := range []float64{0, 1} {
			bufs := make([]*buf, k+1)
			for i := range k {
				dt, n := types[i%len(types)], multiSize(i)
				l := kernels.Contiguous(n)
				if i%10 == 4 {
					l = kernels.Layout{Shape: []int{3, 5}, Strides: []int{1, 3}}
				}
				v := s.uniform(-100, 100)
				bufs[i] = input(dt, l, func(j int) float64 {
					if bad != 0 && i == k-20 && j == 2 {
						return bad
					}
					return v(j)
				})
			}
			bufs[k] = input(dtype.F32, kernels.Layout{}, func(int) float64 { return before })
			const inv = 0.1
			multi := func(be kernels.Backend, o []kernels.Operand) { be.UnscaleMulti(o[:k], inv, o[k]) }
			one := func(be kernels.Backend, o []kernels.Operand) {
				for i := range k {
					be.Unscale(o[i], inv, o[k])
				}
			}
			what := fmt.Sprintf("UnscaleMulti bad=%v found before=%v", bad, before)
			s.sameAsOneByOne(t, what, bufs, multi, one)
			flag := exec(t, s.tg, bufs, multi)[k]
			want := before
			if bad != 0 {
				want = 1
			}
			require.Equal(t, want, get(dtype.F32, flag, 0), "%s: the flag", what)
		}
	}
}

// testMultiMisuse: lists of different lengths are the caller's bug, named before
// anything is written.
func testMultiMisuse(t *testing.T, s *suite) {
	p := row(dtype.F32, 5, s.uniform(-1, 1))
	lr, steps := row(dtype.F64, 1, func(int) float64 { return 0.1 }), row(dtype.F64, 2, func(int) float64 { return 0 })
	for _, c := range []struct {
		msg string
		f   kernelCall
	}{
		{"sgd_multi: lists (g, first) of [1 0] entries for 1 parameters; pass one entry per tensor in each",
			func(be kernels.Backend, o []kernels.Operand) {
				be.SGDMulti(kernels.SGD{LR: 0.1}, o[:1], o[:1], nil, nil)
			}},
		{"adam_multi: lists (steps, g, m, v) of [1 1 1 0] entries for 1 parameters; pass one entry per tensor in each",
			func(be kernels.Backend, o []kernels.Operand) {
				be.AdamMulti(kernels.Adam{LR: 0.1}, []int{1}, o[:1], o[:1], o[:1], nil)
			}},
		{"adam_multi_capturable: parameters 0 and 1 share step count 0; give each parameter its own",
			func(be kernels.Backend, o []kernels.Operand) {
				ps := []kernels.Operand{o[0], o[0]}
				be.AdamMultiCapturable(kernels.Adam{LR: 0.1}, o[1], o[2], []int{0, 0}, ps, ps, ps, ps)
			}},
	} {
		got := exec(t, s.tg, []*buf{p, lr, steps}, func(be kernels.Backend, o []kernels.Operand) {
			defer func() {
				msg, _ := recover().(string)
				require.Contains(t, msg, c.msg)
			}()
			c.f(be, o)
		})
		require.Equal(t, p.data, got[0], "%s: nothing written", c.msg)
	}
}
