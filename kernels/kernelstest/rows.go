package kernelstest

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// row is a contiguous F32 input of n elements drawn from v.
func row(n int, v func(int) float64) *buf { return input(dtype.F32, kernels.Contiguous(n), v) }

// refSoftmax is softmax (log-softmax) of x along the middle of [outer, n, inner].
func refSoftmax(x []float64, outer, n, inner int, log bool) []float64 {
	y := make([]float64, len(x))
	for o := range outer {
		for j := range inner {
			at := func(p int) int { return (o*n+p)*inner + j }
			mx := math.Inf(-1)
			for p := range n {
				mx = math.Max(mx, x[at(p)])
			}
			var sum float64
			for p := range n {
				sum += math.Exp(x[at(p)] - mx)
			}
			for p := range n {
				if log {
					y[at(p)] = x[at(p)] - mx - math.Log(sum)
				} else {
					y[at(p)] = math.Exp(x[at(p)]-mx) / sum
				}
			}
		}
	}
	return y
}

func testSoftmax(t *testing.T, s *suite) {
	for _, sz := range [][3]int{{3, 5, 1}, {2, 1500, 1}, {2, 7, 3}, {0, 4, 1}} {
		outer, n, inner := sz[0], sz[1], sz[2]
		size := outer * n * inner
		for _, log := range []bool{false, true} {
			x := row(size, s.uniform(-5, 5))
			want := refSoftmax(x.vals(), outer, n, inner, log)
			name := fmt.Sprintf("%v log=%v", sz, log)
			f := func(o []kernels.Operand) {
				if log {
					s.tg.Backend.LogSoftmax(o[0], o[1], outer, n, inner)
				} else {
					s.tg.Backend.Softmax(o[0], o[1], outer, n, inner)
				}
			}
			s.result(t, name, []*buf{dense(dtype.F32, size), x}, 0, want, tol{rel: 1e-5, abs: 1e-6}, f)
			s.result(t, name+" in place", []*buf{x}, 0, want, tol{rel: 1e-5, abs: 1e-6},
				func(o []kernels.Operand) { f([]kernels.Operand{o[0], o[0]}) })

			// Backward at y (rounded as the forward stored it).
			y := row(size, func(i int) float64 { return want[i] })
			g := row(size, s.uniform(-1, 1))
			ys, gs := y.vals(), g.vals()
			dx := make([]float64, size)
			for o := range outer {
				for j := range inner {
					at := func(p int) int { return (o*n+p)*inner + j }
					var dot float64
					for p := range n {
						if log {
							dot += gs[at(p)]
						} else {
							dot += gs[at(p)] * ys[at(p)]
						}
					}
					for p := range n {
						if log {
							dx[at(p)] = gs[at(p)] - math.Exp(ys[at(p)])*dot
						} else {
							dx[at(p)] = ys[at(p)] * (gs[at(p)] - dot)
						}
					}
				}
			}
			s.result(t, name+" backward", []*buf{dense(dtype.F32, size), g, y}, 0, dx, tol{rel: 1e-5, abs: 1e-6},
				func(o []kernels.Operand) {
					if log {
						s.tg.Backend.LogSoftmaxBackward(o[0], o[1], o[2], outer, n, inner)
					} else {
						s.tg.Backend.SoftmaxBackward(o[0], o[1], o[2], outer, n, inner)
					}
				})
		}
	}
}

func testLayerNorm(t *testing.T, s *suite) {
	const eps = 1e-5
	for _, sz := range [][2]int{{3, 7}, {2, 1500}, {2100, 5}, {0, 4}} {
		rows, n := sz[0], sz[1]
		for _, affine := range []bool{true, false} {
			x := row(rows*n, s.uniform(-3, 3))
			w, b := absent(), absent()
			ws, bs := make([]float64, n), make([]float64, n)
			for j := range ws {
				ws[j] = 1
			}
			if affine {
				w, b = row(n, s.uniform(0.5, 1.5)), row(n, s.uniform(-1, 1))
				ws, bs = w.vals(), b.vals()
			}
			xs := x.vals()
			mean, rstd, y := make([]float64, rows), make([]float64, rows), make([]float64, rows*n)
			for i := range rows {
				var mu, v float64
				for j := range n {
					mu += xs[i*n+j]
				}
				mu /= float64(n)
				for j := range n {
					v += (xs[i*n+j] - mu) * (xs[i*n+j] - mu)
				}
				mean[i], rstd[i] = mu, 1/math.Sqrt(v/float64(n)+float64(float32(eps)))
				for j := range n {
					y[i*n+j] = (xs[i*n+j]-mu)*rstd[i]*ws[j] + bs[j]
				}
			}
			name := fmt.Sprintf("%v affine=%v", sz, affine)
			bufs := []*buf{dense(dtype.F32, rows*n), dense(dtype.F32, rows), dense(dtype.F32, rows), x, w, b}
			f := func(o []kernels.Operand) { s.tg.Backend.LayerNorm(o[0], o[1], o[2], o[3], o[4], o[5], rows, n, eps) }
			s.result(t, name+" y", bufs, 0, y, tol{rel: 1e-5, abs: 1e-5}, f)
			s.result(t, name+" mean", bufs, 1, mean, tol{rel: 1e-6, abs: 1e-6}, f)
			s.result(t, name+" rstd", bufs, 2, rstd, tol{rel: 1e-5, abs: 1e-6}, f)

			// Backward from the saved mean and rstd, rounded as stored.
			mb, rb := row(rows, func(i int) float64 { return mean[i] }), row(rows, func(i int) float64 { return rstd[i] })
			ms, rs := mb.vals(), rb.vals()
			g := row(rows*n, s.uniform(-1, 1))
			gs := g.vals()
			dx, dw, db := make([]float64, rows*n), make([]float64, n), make([]float64, n)
			for i := range rows {
				var sg, sgx float64
				for j := range n {
					xh := (xs[i*n+j] - ms[i]) * rs[i]
					sg += gs[i*n+j] * ws[j]
					sgx += gs[i*n+j] * ws[j] * xh
					dw[j] += gs[i*n+j] * xh
					db[j] += gs[i*n+j]
				}
				for j := range n {
					xh := (xs[i*n+j] - ms[i]) * rs[i]
					dx[i*n+j] = rs[i] * (gs[i*n+j]*ws[j] - sg/float64(n) - xh*sgx/float64(n))
				}
			}
			bb := []*buf{dense(dtype.F32, rows*n), dense(dtype.F32, n), dense(dtype.F32, n), g, x, mb, rb, w}
			fb := func(o []kernels.Operand) {
				s.tg.Backend.LayerNormBackward(o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7], rows, n)
			}
			tl := tol{rel: 1e-4, abs: 1e-5 * float64(max(rows, 1))}
			s.result(t, name+" dx", bb, 0, dx, tol{rel: 1e-4, abs: 1e-5}, fb)
			s.result(t, name+" dw", bb, 1, dw, tl, fb)
			s.result(t, name+" db", bb, 2, db, tl, fb)
			// Only some gradients wanted.
			s.result(t, name+" db alone", []*buf{absent(), absent(), dense(dtype.F32, n), g, x, mb, rb, w}, 2, db, tl, fb)
		}
	}
}

// requireIndexError asserts that err, or the next Check of an asynchronous backend
// when err is nil, is an *kernels.IndexError of op at pos, and that nothing is pending
// afterwards.
func (s *suite) requireIndexError(t *testing.T, err error, op string, pos int, index int64, limit int) {
	t.Helper()
	if err == nil {
		err = s.check()
	}
	var ie *kernels.IndexError
	require.True(t, errors.As(err, &ie), "want an index error of %s, got %v", op, err)
	assert.Equal(t, kernels.IndexError{Op: op, Pos: pos, Index: index, Limit: limit}, *ie)
	require.NoError(t, s.check(), "the error is reported once")
}

func testCrossEntropy(t *testing.T, s *suite) {
	require.NoError(t, s.check())
	const ignore = -100
	for _, c := range []int{4, 1500} {
		const n = 5
		x := row(n*c, s.uniform(-4, 4))
		labels := input(dtype.I64, kernels.Contiguous(n), func(i int) float64 {
			if i == 3 {
				return ignore
			}
			return float64((i * 7) % c)
		})
		xs, ls := x.vals(), labels.vals()
		lse := make([]float64, n)
		var sum float64
		count := 0
		for i := range n {
			mx := math.Inf(-1)
			for j := range c {
				mx = math.Max(mx, xs[i*c+j])
			}
			var e float64
			for j := range c {
				e += math.Exp(xs[i*c+j] - mx)
			}
			lse[i] = mx + math.Log(e)
			if ls[i] != ignore {
				sum += lse[i] - xs[i*c+int(ls[i])]
				count++
			}
		}
		for _, ldt := range []dtype.DType{dtype.F32, dtype.F16} {
			bufs := []*buf{dense(ldt), dense(dtype.F32, n), x, labels}
			f := func(o []kernels.Operand) {
				require.NoError(t, s.tg.Backend.CrossEntropy(o[0], o[1], o[2], o[3], n, c, ignore))
			}
			name := fmt.Sprintf("c=%d loss %v", c, ldt)
			s.result(t, name, bufs, 0, []float64{sum / float64(count)}, within(ldt, 1e-5), f)
			s.result(t, name+" lse", bufs, 1, lse, tol{rel: 1e-6, abs: 1e-6}, f)
		}
		// Backward, scaled by a BF16 gradient.
		lb := row(n, func(i int) float64 { return lse[i] })
		lbs := lb.vals()
		g := input(dtype.BF16, kernels.Layout{}, func(int) float64 { return 1.5 })
		dx := make([]float64, n*c)
		for i := range n {
			if ls[i] == ignore {
				continue
			}
			for j := range c {
				dx[i*c+j] = math.Exp(xs[i*c+j]-lbs[i]) * 1.5 / float64(count)
			}
			dx[i*c+int(ls[i])] -= 1.5 / float64(count)
		}
		s.result(t, fmt.Sprintf("c=%d backward", c), []*buf{dense(dtype.F32, n*c), x, lb, labels, g}, 0, dx, tol{rel: 1e-5, abs: 1e-6},
			func(o []kernels.Operand) {
				s.tg.Backend.CrossEntropyBackward(o[0], o[1], o[2], o[3], o[4], n, c, ignore)
			})
	}
	// Every row ignored: NaN, as PyTorch.
	s.result(t, "all ignored", []*buf{dense(dtype.F32), dense(dtype.F32, 2), row(6, s.uniform(-1, 1)), input(dtype.I64, kernels.Contiguous(2), func(int) float64 { return ignore })},
		0, []float64{math.NaN()}, exact, func(o []kernels.Operand) {
			require.NoError(t, s.tg.Backend.CrossEntropy(o[0], o[1], o[2], o[3], 2, 3, ignore))
		})
	// A label outside [0, c): an index error naming the first.
	bad := input(dtype.I64, kernels.Contiguous(4), func(i int) float64 { return []float64{1, 0, 7, -3}[i] })
	var err error
	exec(t, s.tg, []*buf{dense(dtype.F32), dense(dtype.F32, 4), row(12, s.uniform(-1, 1)), bad}, func(o []kernels.Operand) {
		err = s.tg.Backend.CrossEntropy(o[0], o[1], o[2], o[3], 4, 3, ignore)
	})
	s.requireIndexError(t, err, "cross_entropy", 2, 7, 3)
}

func testMSE(t *testing.T, s *suite) {
	for _, n := range []int{0, 7, 70000} {
		a, b := row(n, s.uniform(-2, 2)), row(n, s.uniform(-2, 2))
		as, bs := a.vals(), b.vals()
		var sum float64
		for i := range n {
			sum += (as[i] - bs[i]) * (as[i] - bs[i])
		}
		for _, ldt := range []dtype.DType{dtype.F32, dtype.BF16} {
			s.result(t, fmt.Sprintf("n=%d %v", n, ldt), []*buf{dense(ldt), a, b}, 0, []float64{sum / float64(n)}, within(ldt, 1e-6),
				func(o []kernels.Operand) { s.tg.Backend.MSE(o[0], o[1], o[2]) })
		}
		g := input(dtype.F16, kernels.Layout{}, func(int) float64 { return 0.5 })
		da := make([]float64, n)
		for i := range n {
			da[i] = 2 * 0.5 * (as[i] - bs[i]) / float64(n)
		}
		db := make([]float64, n)
		for i := range da {
			db[i] = -da[i]
		}
		f := func(o []kernels.Operand) { s.tg.Backend.MSEBackward(o[0], o[1], o[2], o[3], o[4]) }
		s.result(t, fmt.Sprintf("n=%d da", n), []*buf{dense(dtype.F32, n), dense(dtype.F32, n), a, b, g}, 0, da, tol{rel: 1e-6, abs: 1e-9}, f)
		s.result(t, fmt.Sprintf("n=%d db", n), []*buf{dense(dtype.F32, n), dense(dtype.F32, n), a, b, g}, 1, db, tol{rel: 1e-6, abs: 1e-9}, f)
		s.result(t, fmt.Sprintf("n=%d db alone", n), []*buf{absent(), dense(dtype.F32, n), a, b, g}, 1, db, tol{rel: 1e-6, abs: 1e-9}, f)
	}
}

func testEmbedding(t *testing.T, s *suite) {
	require.NoError(t, s.check())
	const vocab, dim = 5, 3
	w := row(vocab*dim, s.uniform(-1, 1))
	idx := input(dtype.I64, kernels.Contiguous(2, 3), func(i int) float64 { return []float64{4, 0, 4, 2, 4, 1}[i] })
	ws, is := w.vals(), idx.vals()
	want := make([]float64, 6*dim)
	for i, r := range is {
		copy(want[i*dim:], ws[int(r)*dim:int(r+1)*dim])
	}
	s.result(t, "gather", []*buf{dense(dtype.F32, 6*dim), w, idx}, 0, want, exact,
		func(o []kernels.Operand) { require.NoError(t, s.tg.Backend.Embedding(o[0], o[1], o[2], dim)) })

	// Backward adds into dw: repeated rows (4 three times) in index order.
	dw := row(vocab*dim, s.uniform(-1, 1))
	g := row(6*dim, s.uniform(-1, 1))
	gs := g.vals()
	sum := dw.vals()
	for i, r := range is {
		for j := range dim {
			sum[int(r)*dim+j] += gs[i*dim+j]
		}
	}
	s.result(t, "scatter-add", []*buf{dw, g, idx}, 0, sum, tol{rel: 1e-6, abs: 1e-7},
		func(o []kernels.Operand) { require.NoError(t, s.tg.Backend.EmbeddingBackward(o[0], o[1], o[2], dim)) })

	bad := input(dtype.I64, kernels.Contiguous(3), func(i int) float64 { return []float64{1, 5, -1}[i] })
	var err error
	exec(t, s.tg, []*buf{dense(dtype.F32, 3*dim), w, bad}, func(o []kernels.Operand) { err = s.tg.Backend.Embedding(o[0], o[1], o[2], dim) })
	s.requireIndexError(t, err, "embedding", 1, 5, vocab)
	exec(t, s.tg, []*buf{dense(dtype.F32, vocab*dim), row(3*dim, s.uniform(-1, 1)), bad}, func(o []kernels.Operand) {
		err = s.tg.Backend.EmbeddingBackward(o[0], o[1], o[2], dim)
	})
	s.requireIndexError(t, err, "embedding backward", 1, 5, vocab)
}

func testOptimizers(t *testing.T, s *suite) {
	const n = 9
	for _, c := range []kernels.SGD{
		{LR: 0.1},
		{LR: 0.1, WeightDecay: 0.01},
		{LR: 0.05, Momentum: 0.9},
		{LR: 0.05, Momentum: 0.9, Dampening: 0.1, WeightDecay: 0.001},
		{LR: 0.05, Momentum: 0.9, Nesterov: true},
	} {
		for _, first := range []bool{true, false} {
			p, g, mom := row(n, s.uniform(-1, 1)), row(n, s.uniform(-1, 1)), row(n, s.uniform(-1, 1))
			ps, gs, bs := p.vals(), g.vals(), mom.vals()
			wp, wb := make([]float64, n), make([]float64, n)
			f32 := func(v float64) float64 { return float64(float32(v)) }
			for i := range n {
				d := gs[i] + f32(c.WeightDecay)*ps[i]
				b := bs[i]
				if c.Momentum != 0 {
					b = d
					if !first {
						b = f32(c.Momentum)*bs[i] + (1-f32(c.Dampening))*d
					}
					if c.Nesterov {
						d += f32(c.Momentum) * b
					} else {
						d = b
					}
				}
				wp[i], wb[i] = ps[i]-f32(c.LR)*d, b
			}
			bufArg := mom
			if c.Momentum == 0 {
				bufArg = absent()
			}
			bufs := []*buf{p, g, bufArg}
			f := func(o []kernels.Operand) { s.tg.Backend.SGD(c, o[0], o[1], o[2], first) }
			name := fmt.Sprintf("SGD %+v first=%v", c, first)
			s.result(t, name, bufs, 0, wp, tol{rel: 1e-6, abs: 1e-7}, f)
			if c.Momentum != 0 {
				s.result(t, name+" buffer", bufs, 2, wb, tol{rel: 1e-6, abs: 1e-7}, f)
			}
		}
	}
	for _, c := range []kernels.Adam{
		{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
		{LR: 1e-2, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, WeightDecay: 0.1},
		{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Decoupled: true},
	} {
		for _, step := range []int{1, 5} {
			p, g := row(n, s.uniform(-1, 1)), row(n, s.uniform(-1, 1))
			m, v := row(n, s.uniform(-0.1, 0.1)), row(n, s.uniform(0, 0.01))
			ps, gs, ms, vs := p.vals(), g.vals(), m.vals(), v.vals()
			wp, wm, wv := make([]float64, n), make([]float64, n), make([]float64, n)
			bc1, bc2 := 1-math.Pow(c.Beta1, float64(step)), 1-math.Pow(c.Beta2, float64(step))
			for i := range n {
				d := gs[i]
				if !c.Decoupled {
					d += c.WeightDecay * ps[i]
				}
				wm[i] = c.Beta1*ms[i] + (1-c.Beta1)*d
				wv[i] = c.Beta2*vs[i] + (1-c.Beta2)*d*d
				decay := 1.0
				if c.Decoupled {
					decay = 1 - c.LR*c.WeightDecay
				}
				wp[i] = ps[i]*decay - c.LR/bc1*wm[i]/(math.Sqrt(wv[i])/math.Sqrt(bc2)+c.Eps)
			}
			bufs := []*buf{p, g, m, v}
			f := func(o []kernels.Operand) { s.tg.Backend.Adam(c, step, o[0], o[1], o[2], o[3]) }
			name := fmt.Sprintf("Adam %+v step %d", c, step)
			s.result(t, name, bufs, 0, wp, tol{rel: 1e-5, abs: 1e-6}, f)
			s.result(t, name+" m", bufs, 2, wm, tol{rel: 1e-5, abs: 1e-7}, f)
			s.result(t, name+" v", bufs, 3, wv, tol{rel: 1e-5, abs: 1e-9}, f)
		}
	}
}

func testAMP(t *testing.T, s *suite) {
	for _, dt := range floats {
		for _, bad := range []float64{0, math.Inf(1), math.NaN()} {
			for _, before := range []float64{0, 1} {
				l := kernels.Layout{Shape: []int{3, 4}, Strides: []int{1, 3}}
				g := input(dt, l, func(i int) float64 {
					if i == 5 && bad != 0 {
						return bad
					}
					return float64(i) - 4.5
				})
				gs := g.vals()
				want := make([]float64, 12)
				for i, v := range gs {
					want[i] = v * float64(float32(0.125))
				}
				found := input(dtype.F32, kernels.Layout{}, func(int) float64 { return before })
				flag := before
				if bad != 0 {
					flag = 1
				}
				bufs := []*buf{g, found}
				f := func(o []kernels.Operand) { s.tg.Backend.Unscale(o[0], 0.125, o[1]) }
				name := fmt.Sprintf("unscale %v bad=%v found before=%v", dt, bad, before)
				s.result(t, name, bufs, 0, want, within(dt, 1e-7), f)
				s.result(t, name+" flag", bufs, 1, []float64{flag}, exact, f)

				var got bool
				exec(t, s.tg, []*buf{g}, func(o []kernels.Operand) { got = s.tg.Backend.NonFinite(o[0]) })
				assert.Equal(t, bad != 0, got, "non_finite %v bad=%v", dt, bad)
			}
		}
	}
	var got bool
	exec(t, s.tg, []*buf{dense(dtype.F32, 0)}, func(o []kernels.Operand) { got = s.tg.Backend.NonFinite(o[0]) })
	assert.False(t, got, "nothing is finite-or-not")
}
