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

// row is a contiguous input of the row type ft (F32 or F64) of n elements drawn from v.
func row(ft dtype.DType, n int, v func(int) float64) *buf { return input(ft, kernels.Contiguous(n), v) }

// tolRow is t for a row kernel computing in ft whose results sum up to n terms of about
// 1 in float64: t itself for F32 and, for F64, in64(t) but no less than n·2⁻⁵², the
// bound on any order of n float64 additions (the reference's and the kernel's).
func tolRow(ft dtype.DType, n int, t tol) tol {
	if ft != dtype.F64 {
		return t
	}
	t, b := in64(t), float64(max(n, 1))*0x1p-52
	return tol{rel: max(t.rel, b), abs: max(t.abs, b)}
}

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
	for _, ft := range rowTypes {
		// Rows of 5, 200 and 700 (cuda: a warp each, float32 rows in registers), 1500
		// and 1501 (a block), 8195 (a block reading its row from memory), columns.
		for _, sz := range [][3]int{{3, 5, 1}, {2, 200, 1}, {3, 700, 1}, {2, 1500, 1}, {2, 1501, 1}, {1, 8195, 1}, {2, 7, 3}, {0, 4, 1}} {
			outer, n, inner := sz[0], sz[1], sz[2]
			size := outer * n * inner
			tl := tolRow(ft, n, tol{rel: 1e-5, abs: 1e-6})
			for _, log := range []bool{false, true} {
				x := row(ft, size, s.uniform(-5, 5))
				want := refSoftmax(x.vals(), outer, n, inner, log)
				name := fmt.Sprintf("%v %v log=%v", ft, sz, log)
				f := func(be kernels.Backend, o []kernels.Operand) {
					if log {
						be.LogSoftmax(o[0], o[1], outer, n, inner)
					} else {
						be.Softmax(o[0], o[1], outer, n, inner)
					}
				}
				s.result(t, name, []*buf{dense(ft, size), x}, 0, want, tl, f)
				s.result(t, name+" in place", []*buf{x}, 0, want, tl,
					func(be kernels.Backend, o []kernels.Operand) { f(be, []kernels.Operand{o[0], o[0]}) })

				// Backward at y (rounded as the forward stored it).
				y := row(ft, size, func(i int) float64 { return want[i] })
				g := row(ft, size, s.uniform(-1, 1))
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
				s.result(t, name+" backward", []*buf{dense(ft, size), g, y}, 0, dx, tl,
					func(be kernels.Backend, o []kernels.Operand) {
						if log {
							be.LogSoftmaxBackward(o[0], o[1], o[2], outer, n, inner)
						} else {
							be.SoftmaxBackward(o[0], o[1], o[2], outer, n, inner)
						}
					})
			}
		}
	}
}

// testLayerNorm: eps (1e-5, which no float32 holds) is rounded to the rows' type.
func testLayerNorm(t *testing.T, s *suite) {
	const eps = 1e-5
	for _, ft := range rowTypes {
		e := eps
		if ft != dtype.F64 {
			e = float64(float32(eps))
		}
		// Rows of 7, 8 and 700 (cuda: a warp each, float32 rows in registers), 1500 and
		// 1501 (a block), 8195 (a block reading its row from memory).
		for _, sz := range [][2]int{{3, 7}, {3, 8}, {3, 700}, {2, 1500}, {2, 1501}, {1, 8195}, {2100, 5}, {0, 4}} {
			rows, n := sz[0], sz[1]
			for _, affine := range []bool{true, false} {
				x := row(ft, rows*n, s.uniform(-3, 3))
				w, b := absent(), absent()
				ws, bs := make([]float64, n), make([]float64, n)
				for j := range ws {
					ws[j] = 1
				}
				if affine {
					w, b = row(ft, n, s.uniform(0.5, 1.5)), row(ft, n, s.uniform(-1, 1))
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
					mean[i], rstd[i] = mu, 1/math.Sqrt(v/float64(n)+e)
					for j := range n {
						y[i*n+j] = (xs[i*n+j]-mu)*rstd[i]*ws[j] + bs[j]
					}
				}
				name := fmt.Sprintf("%v %v affine=%v", ft, sz, affine)
				bufs := []*buf{dense(ft, rows*n), dense(ft, rows), dense(ft, rows), x, w, b}
				f := func(be kernels.Backend, o []kernels.Operand) {
					be.LayerNorm(o[0], o[1], o[2], o[3], o[4], o[5], rows, n, eps)
				}
				s.result(t, name+" y", bufs, 0, y, tolRow(ft, n, tol{rel: 1e-5, abs: 1e-5}), f)
				s.result(t, name+" mean", bufs, 1, mean, tolRow(ft, n, tol{rel: 1e-6, abs: 1e-6}), f)
				s.result(t, name+" rstd", bufs, 2, rstd, tolRow(ft, n, tol{rel: 1e-5, abs: 1e-6}), f)

				// Backward from the saved mean and rstd, rounded as stored.
				mb, rb := row(ft, rows, func(i int) float64 { return mean[i] }), row(ft, rows, func(i int) float64 { return rstd[i] })
				ms, rs := mb.vals(), rb.vals()
				g := row(ft, rows*n, s.uniform(-1, 1))
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
				bb := []*buf{dense(ft, rows*n), dense(ft, n), dense(ft, n), g, x, mb, rb, w}
				fb := func(be kernels.Backend, o []kernels.Operand) {
					be.LayerNormBackward(o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7], rows, n)
				}
				tl := tolRow(ft, rows*4, tol{rel: 1e-4, abs: 1e-5 * float64(max(rows, 1))})
				s.result(t, name+" dx", bb, 0, dx, tolRow(ft, n*4, tol{rel: 1e-4, abs: 1e-5}), fb)
				s.result(t, name+" dw", bb, 1, dw, tl, fb)
				s.result(t, name+" db", bb, 2, db, tl, fb)
				// Only some gradients wanted.
				s.result(t, name+" db alone", []*buf{absent(), absent(), dense(ft, n), g, x, mb, rb, w}, 2, db, tl, fb)
			}
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

// lossTypes are the types a loss of rows of ft is written in: F32, half (F16 or BF16)
// and, for F64 rows, F64 (an F64 loss of F32 rows holds a float32 result).
func lossTypes(ft, half dtype.DType) []dtype.DType {
	if ft == dtype.F64 {
		return []dtype.DType{dtype.F32, half, dtype.F64}
	}
	return []dtype.DType{dtype.F32, half}
}

// within32 is within for the half and float32 types, and t itself for F64 (which
// tolRow scales).
func within32(dt dtype.DType, f32 float64) tol {
	if dt == dtype.F64 {
		return tol{rel: f32, abs: f32}
	}
	return within(dt, f32)
}

// ceShapes are testCrossEntropy's [n, c]: rows for a warp (cuda: 8 rows a block) in one
// block and in several, rows for a block (c > 1024) in several, no rows, and (cuda)
// more warps' rows than the forward's blocks (2048) take at once, each block then
// taking several.
var ceShapes = [][2]int{{5, 4}, {5, 1500}, {3000, 4}, {0, 4}, {16500, 3}}

// ceLabels are n labels of c classes, every fifth row (from the fourth) ignore.
func ceLabels(n, c int, ignore int64) func(int) float64 {
	return func(i int) float64 {
		if i%5 == 3 {
			return float64(ignore)
		}
		return float64((i * 7) % c)
	}
}

func testCrossEntropy(t *testing.T, s *suite) {
	require.NoError(t, s.check())
	const ignore = -100
	for _, ft := range rowTypes {
		for _, sz := range ceShapes {
			n, c := sz[0], sz[1]
			big := n*c > 20000
			x := row(ft, n*c, s.uniform(-4, 4))
			labels := input(dtype.I64, kernels.Contiguous(n), ceLabels(n, c, ignore))
			xs, ls := x.vals(), labels.vals()
			lse := make([]float64, n+1) // the rows' log-sum-exp, then the count
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
			lse[n] = float64(count)
			// The loss in any float type: rounded to it once from the rows' type (NaN
			// without rows).
			ldts := lossTypes(ft, dtype.F16)
			if big {
				ldts = ldts[:1]
			}
			for _, ldt := range ldts {
				bufs := []*buf{dense(ldt), dense(ft, n+1), x, labels}
				f := func(be kernels.Backend, o []kernels.Operand) {
					require.NoError(t, be.CrossEntropy(o[0], o[1], o[2], o[3], n, c, ignore))
				}
				name := fmt.Sprintf("%v [%d, %d] loss %v", ft, n, c, ldt)
				s.result(t, name, bufs, 0, []float64{sum / float64(count)}, tolRow(ldt, c, within32(ldt, 1e-5)), f)
				s.result(t, name+" lse", bufs, 1, lse, tolRow(ft, c, tol{rel: 1e-6, abs: 1e-6}), f)
				// The same bits again: the blocks' parts are summed in a fixed order,
				// and the forward leaves its ticket as it found it.
				got, again := exec(t, s.tg, bufs, f), exec(t, s.tg, bufs, f)
				require.Equal(t, got[0], again[0], "%s: the loss's bits on a second run", name)
				require.Equal(t, got[1], again[1], "%s: lse's bits on a second run", name)
			}
			// Backward, scaled by a BF16 gradient, and an F64 one of 0.1 (rounded to
			// the rows' type), over the count in lse[n].
			lb := row(ft, n+1, func(i int) float64 { return lse[i] })
			lbs := lb.vals()
			gs := []*buf{input(dtype.BF16, kernels.Layout{}, func(int) float64 { return 1.5 }),
				input(dtype.F64, kernels.Layout{}, func(int) float64 { return 0.1 })}
			if big {
				gs = gs[:1]
			}
			for _, gv := range gs {
				g := gv.vals()[0]
				dx := make([]float64, n*c)
				for i := range n {
					if ls[i] == ignore {
						continue
					}
					for j := range c {
						dx[i*c+j] = math.Exp(xs[i*c+j]-lbs[i]) * g / float64(count)
					}
					dx[i*c+int(ls[i])] -= g / float64(count)
				}
				s.result(t, fmt.Sprintf("%v [%d, %d] backward for %v %v", ft, n, c, gv.dt, g), []*buf{dense(ft, n*c), x, lb, labels, gv}, 0, dx,
					tolRow(ft, 1, tol{rel: 1e-5, abs: 1e-6}), func(be kernels.Backend, o []kernels.Operand) {
						be.CrossEntropyBackward(o[0], o[1], o[2], o[3], o[4], n, c, ignore)
					})
			}
		}
		// Every row ignored: NaN, as PyTorch, and a count of 0.
		allIgnored := []*buf{dense(ft), dense(ft, 3), row(ft, 6, s.uniform(-1, 1)),
			input(dtype.I64, kernels.Contiguous(2), func(int) float64 { return ignore })}
		f := func(be kernels.Backend, o []kernels.Operand) {
			require.NoError(t, be.CrossEntropy(o[0], o[1], o[2], o[3], 2, 3, ignore))
		}
		s.result(t, fmt.Sprintf("%v all ignored", ft), allIgnored, 0, []float64{math.NaN()}, exact, f)
		require.Equal(t, 0.0, allIgnored[1].values(exec(t, s.tg, allIgnored, f)[1])[2], "%v all ignored: the count", ft)
		// A label outside [0, c): an index error naming the first.
		bad := input(dtype.I64, kernels.Contiguous(4), func(i int) float64 { return []float64{1, 0, 7, -3}[i] })
		var err error
		exec(t, s.tg, []*buf{dense(dtype.F32), dense(ft, 5), row(ft, 12, s.uniform(-1, 1)), bad}, func(be kernels.Backend, o []kernels.Operand) {
			err = be.CrossEntropy(o[0], o[1], o[2], o[3], 4, 3, ignore)
		})
		s.requireIndexError(t, err, "cross_entropy", 2, 7, 3)
	}
}

func testMSE(t *testing.T, s *suite) {
	for _, ft := range rowTypes {
		for _, n := range []int{0, 7, 70000} {
			a, b := row(ft, n, s.uniform(-2, 2)), row(ft, n, s.uniform(-2, 2))
			as, bs := a.vals(), b.vals()
			var sum float64
			for i := range n {
				sum += (as[i] - bs[i]) * (as[i] - bs[i])
			}
			for _, ldt := range lossTypes(ft, dtype.BF16) {
				s.result(t, fmt.Sprintf("%v n=%d %v", ft, n, ldt), []*buf{dense(ldt), a, b}, 0, []float64{sum / float64(n)},
					tolRow(ldt, n, within32(ldt, 1e-6)), func(be kernels.Backend, o []kernels.Operand) { be.MSE(o[0], o[1], o[2]) })
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
			tl := tolIn(ft, tol{rel: 1e-6, abs: 1e-9})
			f := func(be kernels.Backend, o []kernels.Operand) { be.MSEBackward(o[0], o[1], o[2], o[3], o[4]) }
			s.result(t, fmt.Sprintf("%v n=%d da", ft, n), []*buf{dense(ft, n), dense(ft, n), a, b, g}, 0, da, tl, f)
			s.result(t, fmt.Sprintf("%v n=%d db", ft, n), []*buf{dense(ft, n), dense(ft, n), a, b, g}, 1, db, tl, f)
			s.result(t, fmt.Sprintf("%v n=%d db alone", ft, n), []*buf{absent(), dense(ft, n), a, b, g}, 1, db, tl, f)
		}
	}
}

func testEmbedding(t *testing.T, s *suite) {
	require.NoError(t, s.check())
	const vocab, dim = 5, 3
	for _, ft := range rowTypes {
		w := row(ft, vocab*dim, s.uniform(-1, 1))
		idx := input(dtype.I64, kernels.Contiguous(2, 3), func(i int) float64 { return []float64{4, 0, 4, 2, 4, 1}[i] })
		ws, is := w.vals(), idx.vals()
		want := make([]float64, 6*dim)
		for i, r := range is {
			copy(want[i*dim:], ws[int(r)*dim:int(r+1)*dim])
		}
		s.result(t, fmt.Sprintf("%v gather", ft), []*buf{dense(ft, 6*dim), w, idx}, 0, want, exact,
			func(be kernels.Backend, o []kernels.Operand) { require.NoError(t, be.Embedding(o[0], o[1], o[2], dim)) })

		// Backward adds into dw: repeated rows (4 three times) in index order.
		dw := row(ft, vocab*dim, s.uniform(-1, 1))
		g := row(ft, 6*dim, s.uniform(-1, 1))
		gs := g.vals()
		sum := dw.vals()
		for i, r := range is {
			for j := range dim {
				sum[int(r)*dim+j] += gs[i*dim+j]
			}
		}
		s.result(t, fmt.Sprintf("%v scatter-add", ft), []*buf{dw, g, idx}, 0, sum, tolIn(ft, tol{rel: 1e-6, abs: 1e-7}),
			func(be kernels.Backend, o []kernels.Operand) {
				require.NoError(t, be.EmbeddingBackward(o[0], o[1], o[2], dim))
			})

		// Many indices (more than one block of the GPU's sort), few rows (long runs), a
		// row wider than a warp: the same sums, in index order, and the same bits on a
		// second run.
		const many, rows, wide = 1500, 37, 33
		bigIdx := input(dtype.I64, kernels.Contiguous(many), func(i int) float64 { return float64((i*i + 7*i) % rows) })
		bigDW := row(ft, rows*wide, s.uniform(-1, 1))
		bigG := row(ft, many*wide, s.uniform(-1, 1))
		bis, bgs, bsum := bigIdx.vals(), bigG.vals(), bigDW.vals()
		for i, r := range bis {
			for j := range wide {
				bsum[int(r)*wide+j] += bgs[i*wide+j]
			}
		}
		scatter := func(be kernels.Backend, o []kernels.Operand) {
			require.NoError(t, be.EmbeddingBackward(o[0], o[1], o[2], wide))
		}
		bufs := []*buf{bigDW, bigG, bigIdx}
		s.result(t, fmt.Sprintf("%v scatter-add of %d indices into %d rows", ft, many, rows), bufs, 0, bsum, tolIn(ft, tol{rel: 1e-5, abs: 1e-5}), scatter)
		require.Equal(t, exec(t, s.tg, bufs, scatter)[0], exec(t, s.tg, bufs, scatter)[0], "%v: the same bits twice", ft)

		bad := input(dtype.I64, kernels.Contiguous(3), func(i int) float64 { return []float64{1, 5, -1}[i] })
		var err error
		exec(t, s.tg, []*buf{dense(ft, 3*dim), w, bad}, func(be kernels.Backend, o []kernels.Operand) { err = be.Embedding(o[0], o[1], o[2], dim) })
		s.requireIndexError(t, err, "embedding", 1, 5, vocab)
		exec(t, s.tg, []*buf{dense(ft, vocab*dim), row(ft, 3*dim, s.uniform(-1, 1)), bad}, func(be kernels.Backend, o []kernels.Operand) {
			err = be.EmbeddingBackward(o[0], o[1], o[2], dim)
		})
		s.requireIndexError(t, err, "embedding backward", 1, 5, vocab)
	}
}

// testOptimizers: the hyper-parameters are rounded to the parameters' type (SGD's
// references round them as the kernels must; Adam's float32 tolerance absorbs it, its
// float64 one does not).
func testOptimizers(t *testing.T, s *suite) {
	const n = 9
	for _, ft := range rowTypes {
		round := func(v float64) float64 { return dtRound(ft == dtype.F64, v) }
		for _, c := range []kernels.SGD{
			{LR: 0.1},
			{LR: 0.1, WeightDecay: 0.01},
			{LR: 0.05, Momentum: 0.9},
			{LR: 0.05, Momentum: 0.9, Dampening: 0.1, WeightDecay: 0.001},
			{LR: 0.05, Momentum: 0.9, Nesterov: true},
		} {
			for _, first := range []bool{true, false} {
				p, g, mom := row(ft, n, s.uniform(-1, 1)), row(ft, n, s.uniform(-1, 1)), row(ft, n, s.uniform(-1, 1))
				ps, gs, bs := p.vals(), g.vals(), mom.vals()
				wp, wb := make([]float64, n), make([]float64, n)
				for i := range n {
					d := gs[i] + round(c.WeightDecay)*ps[i]
					b := bs[i]
					if c.Momentum != 0 {
						b = d
						if !first {
							b = round(c.Momentum)*bs[i] + (1-round(c.Dampening))*d
						}
						if c.Nesterov {
							d += round(c.Momentum) * b
						} else {
							d = b
						}
					}
					wp[i], wb[i] = ps[i]-round(c.LR)*d, b
				}
				bufArg := mom
				if c.Momentum == 0 {
					bufArg = absent()
				}
				bufs := []*buf{p, g, bufArg}
				f := func(be kernels.Backend, o []kernels.Operand) { be.SGD(c, o[0], o[1], o[2], first) }
				name := fmt.Sprintf("SGD %v %+v first=%v", ft, c, first)
				tl := tolIn(ft, tol{rel: 1e-6, abs: 1e-7})
				s.result(t, name, bufs, 0, wp, tl, f)
				if c.Momentum != 0 {
					s.result(t, name+" buffer", bufs, 2, wb, tl, f)
				}
			}
		}
		for _, c := range []kernels.Adam{
			{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
			{LR: 1e-2, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, WeightDecay: 0.1},
			{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Decoupled: true},
		} {
			for _, step := range []int{1, 5} {
				p, g := row(ft, n, s.uniform(-1, 1)), row(ft, n, s.uniform(-1, 1))
				m, v := row(ft, n, s.uniform(-0.1, 0.1)), row(ft, n, s.uniform(0, 0.01))
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
				f := func(be kernels.Backend, o []kernels.Operand) { be.Adam(c, step, o[0], o[1], o[2], o[3]) }
				name := fmt.Sprintf("Adam %v %+v step %d", ft, c, step)
				s.result(t, name, bufs, 0, wp, tolIn(ft, tol{rel: 1e-5, abs: 1e-6}), f)
				s.result(t, name+" m", bufs, 2, wm, tolIn(ft, tol{rel: 1e-5, abs: 1e-7}), f)
				s.result(t, name+" v", bufs, 3, wv, tolIn(ft, tol{rel: 1e-5, abs: 1e-9}), f)
			}
		}
	}
}

// testAMP: inv (0.1, which no float32 holds) is rounded to g's compute type; an F64
// beyond float32's range is finite in its own precision.
func testAMP(t *testing.T, s *suite) {
	const inv = 0.1
	for _, dt := range floats {
		bads := []float64{0, math.Inf(1), math.NaN()}
		if dt == dtype.F64 {
			bads = append(bads, 1e300)
		}
		for _, bad := range bads {
			finite := bad == 0 || bad == 1e300
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
					want[i] = v * dtRound(dt == dtype.F64, inv)
				}
				found := input(dtype.F32, kernels.Layout{}, func(int) float64 { return before })
				flag := before
				if !finite {
					flag = 1
				}
				bufs := []*buf{g, found}
				f := func(be kernels.Backend, o []kernels.Operand) { be.Unscale(o[0], inv, o[1]) }
				name := fmt.Sprintf("unscale %v bad=%v found before=%v", dt, bad, before)
				s.result(t, name, bufs, 0, want, within(dt, 1e-7), f)
				s.result(t, name+" flag", bufs, 1, []float64{flag}, exact, f)

				var got bool
				exec(t, s.tg, []*buf{g}, func(be kernels.Backend, o []kernels.Operand) { got = be.NonFinite(o[0]) })
				assert.Equal(t, !finite, got, "non_finite %v bad=%v", dt, bad)
			}
		}
	}
	var got bool
	exec(t, s.tg, []*buf{dense(dtype.F32, 0)}, func(be kernels.Backend, o []kernels.Operand) { got = be.NonFinite(o[0]) })
	assert.False(t, got, "nothing is finite-or-not")
}
