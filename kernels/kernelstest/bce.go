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

// bceOp is the op name of BinaryCrossEntropy's range errors.
const bceOp = "binary_cross_entropy"

var wrts = []kernels.Arg{kernels.ArgA, kernels.ArgB}

func testBCE(t *testing.T, s *suite) {
	require.NoError(t, s.check())
	ls := layouts()
	shape := []int{4, 6}
	prob, target := s.uniform(0.02, 0.98), s.uniform(0, 1)
	loss := func(be kernels.Backend, o []kernels.Operand) {
		require.NoError(t, be.BinaryCrossEntropy(o[0], o[1], o[2]))
	}
	for _, dt := range floats {
		for _, p := range pairs {
			x, y := s.operand(dt, ls, p[0], prob), s.operand(dtype.F32, ls, p[1], target)
			xs, ys := x.bcast(shape), y.bcast(shape)
			want := make([]float64, len(xs))
			for i := range want {
				want[i] = refBCE(xs[i], ys[i])
			}
			name := fmt.Sprintf("%v %s·%s", dt, p[0], p[1])
			s.result(t, name, []*buf{dense(dt, 4, 6), x, y}, 0, want, within(dt, 2e-6), loss)
			g := input(dt, ls["contiguous"], s.uniform(-2, 2))
			gs := g.vals()
			for _, wrt := range wrts {
				for i := range want {
					want[i] = refBCEGrad(wrt, gs[i], xs[i], ys[i])
				}
				s.result(t, fmt.Sprintf("%s backward(%d)", name, wrt), []*buf{dense(dt, 4, 6), g, x, y}, 0, want, within(dt, 4e-6),
					func(be kernels.Backend, o []kernels.Operand) {
						be.BinaryCrossEntropyBackward(wrt, o[0], o[1], o[2], o[3])
					})
			}
		}
		// In place (dst is x), and a transposed output with a broadcast gradient.
		x, y := input(dt, kernels.Contiguous(4, 6), prob), input(dt, ls["strided"], target)
		xs, ys := x.vals(), y.bcast(shape)
		want := make([]float64, len(xs))
		for i := range want {
			want[i] = refBCE(xs[i], ys[i])
		}
		s.result(t, fmt.Sprintf("%v in place", dt), []*buf{x, y}, 0, want, within(dt, 2e-6),
			func(be kernels.Backend, o []kernels.Operand) { loss(be, []kernels.Operand{o[0], o[0], o[1]}) })
		g := input(dtype.F32, ls["column"], s.uniform(-2, 2))
		gs := g.bcast(shape)
		for i := range want {
			want[i] = refBCEGrad(kernels.ArgA, gs[i], xs[i], ys[i])
		}
		s.result(t, fmt.Sprintf("%v backward into a transposed output", dt), []*buf{out(dt, ls["transposed"]), g, x, y}, 0, want, within(dt, 4e-6),
			func(be kernels.Backend, o []kernels.Operand) {
				be.BinaryCrossEntropyBackward(kernels.ArgA, o[0], o[1], o[2], o[3])
			})
	}

	// x at 0 and 1: the logarithms clamped at -100 (losses 0, 30, 70, 100), the input
	// gradient's denominator at 1e-12, the target's gradient infinite.
	xv := []float64{0, 1, 0, 1, 0, 1, 0.5}
	yv := []float64{0, 0, 1, 1, 0.3, 0.3, 0.3}
	for _, dt := range rowTypes {
		x := input(dt, kernels.Contiguous(7), func(i int) float64 { return xv[i] })
		y := input(dt, kernels.Contiguous(7), func(i int) float64 { return yv[i] })
		xs, ys := x.vals(), y.vals()
		want := make([]float64, len(xv))
		for i := range want {
			want[i] = refBCE(xs[i], ys[i])
		}
		s.result(t, fmt.Sprintf("%v at 0 and 1", dt), []*buf{dense(dt, 7), x, y}, 0, want, within(dt, 1e-6), loss)
		g := input(dt, kernels.Layout{}, func(int) float64 { return 0.75 })
		for _, wrt := range wrts {
			for i := range want {
				want[i] = refBCEGrad(wrt, 0.75, xs[i], ys[i])
			}
			s.result(t, fmt.Sprintf("%v backward(%d) at 0 and 1", dt, wrt), []*buf{dense(dt, 7), g, x, y}, 0, want, within(dt, 1e-6),
				func(be kernels.Backend, o []kernels.Operand) {
					be.BinaryCrossEntropyBackward(wrt, o[0], o[1], o[2], o[3])
				})
		}
	}

	s.result(t, "empty", []*buf{dense(dtype.F32, 3, 0), input(dtype.F32, kernels.Contiguous(3, 0), nil), imm(0.5)}, 0, nil, exact, loss)
	testBCERangeErrors(t, s)
}

// testBCERangeErrors: an x outside [0, 1] or NaN is a *kernels.RangeError counting
// every such element the loss reads (a broadcast one once per output element it
// reaches), summed over the whole launch; between two checks an asynchronous backend
// reports the earliest launch's error, whatever its kind.
func testBCERangeErrors(t *testing.T, s *suite) {
	run := func(x *buf) (err error) {
		exec(t, s.tg, []*buf{dense(dtype.F32, x.l.Size()), x, imm(0.5)}, func(be kernels.Backend, o []kernels.Operand) {
			err = be.BinaryCrossEntropy(o[0], o[1], o[2])
		})
		return err
	}
	vals := []float64{0.5, 1.5, -1, math.NaN(), 0, 1, math.Inf(1), math.Copysign(0, -1)}
	for _, dt := range floats {
		x := input(dt, kernels.Contiguous(len(vals)), func(i int) float64 { return vals[i] })
		s.requireRangeError(t, run(x), dt.String(), 4) // 1.5, -1, NaN, +Inf
	}
	// In float64: values float32 would round into [0, 1] (to 1 and to -0) are outside.
	edge := []float64{1 + 0x1p-40, -0x1p-1000, 0.5, 1}
	s.requireRangeError(t, run(input(dtype.F64, kernels.Contiguous(4), func(i int) float64 { return edge[i] })), "float64 just outside", 2)
	many := input(dtype.F32, kernels.Contiguous(70000), func(i int) float64 {
		if i%7 == 3 {
			return 2 + float64(i%5)
		}
		return 0.5
	})
	s.requireRangeError(t, run(many), "every seventh of 70000", 10000)
	var err error
	oneBadColumn := input(dtype.F32, kernels.Contiguous(6), func(i int) float64 { return []float64{0.5, 2, 0.5, 0.5, 0.5, 0.5}[i] })
	exec(t, s.tg, []*buf{dense(dtype.F16, 4, 6), oneBadColumn, imm(1)}, func(be kernels.Backend, o []kernels.Operand) {
		err = be.BinaryCrossEntropy(o[0], o[1], o[2])
	})
	s.requireRangeError(t, err, "a broadcast row", 4)

	// Two launches with errors before one check.
	two := input(dtype.F32, kernels.Contiguous(3), func(i int) float64 { return []float64{2, 0.5, -2}[i] })
	one := input(dtype.F32, kernels.Contiguous(1), func(int) float64 { return 3 })
	var errs [2]error
	exec(t, s.tg, []*buf{dense(dtype.F32, 3), two, imm(0), dense(dtype.F32, 1), one}, func(be kernels.Backend, o []kernels.Operand) {
		errs[0] = be.BinaryCrossEntropy(o[0], o[1], o[2])
		errs[1] = be.BinaryCrossEntropy(o[3], o[4], o[2])
	})
	if errs[0] == nil && errs[1] == nil {
		s.requireRangeError(t, nil, "the earlier of two launches", 2)
	} else {
		s.requireRangeError(t, errs[0], "the first launch", 2)
		s.requireRangeError(t, errs[1], "the second launch", 1)
	}
	// With an index error (Embedding of row 5 of a table of 2): the earlier launch's.
	table, idx := row(dtype.F32, 2, s.uniform(-1, 1)), input(dtype.I64, kernels.Contiguous(1), func(int) float64 { return 5 })
	for _, rangeFirst := range []bool{true, false} {
		var re, ie error
		exec(t, s.tg, []*buf{dense(dtype.F32, 3), two, imm(0), dense(dtype.F32, 1), table, idx}, func(be kernels.Backend, o []kernels.Operand) {
			if rangeFirst {
				re = be.BinaryCrossEntropy(o[0], o[1], o[2])
			}
			ie = be.Embedding(o[3], o[4], o[5], 1)
			if !rangeFirst {
				re = be.BinaryCrossEntropy(o[0], o[1], o[2])
			}
		})
		switch {
		case re != nil || ie != nil: // synchronous: each op returns its own
			s.requireRangeError(t, re, "with an index error", 2)
			s.requireIndexError(t, ie, "embedding", 0, 5, 2)
		case rangeFirst:
			s.requireRangeError(t, nil, "before an index error", 2)
		default:
			s.requireIndexError(t, nil, "embedding", 0, 5, 2)
		}
	}
}

// requireRangeError asserts that err, or the next Check of an asynchronous backend when
// err is nil, is BinaryCrossEntropy's *kernels.RangeError for count elements, and that
// nothing is pending afterwards.
func (s *suite) requireRangeError(t *testing.T, err error, what string, count int) {
	t.Helper()
	if err == nil {
		err = s.check()
	}
	var re *kernels.RangeError
	require.True(t, errors.As(err, &re), "%s: want a range error of %s, got %v", what, bceOp, err)
	assert.Equal(t, kernels.RangeError{Op: bceOp, Count: count, Lo: 0, Hi: 1}, *re, what)
	require.NoError(t, s.check(), "%s: the error is reported once", what)
}

func testBCEWithLogits(t *testing.T, s *suite) {
	ls := layouts()
	shape := []int{4, 6}
	logit, target, weight := s.uniform(-4, 4), s.uniform(0, 1), s.uniform(0.5, 2)
	for _, dt := range floats {
		for _, p := range pairs {
			for _, pn := range []string{"absent", "row", "scalar"} {
				x, y := s.operand(dt, ls, p[0], logit), s.operand(dtype.F32, ls, p[1], target)
				pw := absent()
				if pn != "absent" {
					pw = s.operand(dtype.F32, ls, pn, weight)
				}
				xs, ys, ws := x.bcast(shape), y.bcast(shape), pw.bcast(shape)
				if pw.absent {
					for i := range ws {
						ws[i] = 1
					}
				}
				want := make([]float64, len(xs))
				for i := range want {
					want[i] = refBCELogits(xs[i], ys[i], ws[i])
				}
				name := fmt.Sprintf("%v %s·%s pos_weight %s", dt, p[0], p[1], pn)
				s.result(t, name, []*buf{dense(dt, 4, 6), x, y, pw}, 0, want, within(dt, 4e-6),
					func(be kernels.Backend, o []kernels.Operand) { be.BinaryCrossEntropyWithLogits(o[0], o[1], o[2], o[3]) })
				g := input(dt, ls["contiguous"], s.uniform(-2, 2))
				if pn == "row" {
					g = input(dt, ls["column"], s.uniform(-2, 2)) // five operands, four broadcast
				}
				gs := g.bcast(shape)
				for _, wrt := range wrts {
					for i := range want {
						want[i] = refBCELogitsGrad(wrt, gs[i], xs[i], ys[i], ws[i])
					}
					s.result(t, fmt.Sprintf("%s backward(%d)", name, wrt), []*buf{dense(dt, 4, 6), g, x, y, pw}, 0, want, within(dt, 8e-6),
						func(be kernels.Backend, o []kernels.Operand) {
							be.BinaryCrossEntropyWithLogitsBackward(wrt, o[0], o[1], o[2], o[3], o[4])
						})
				}
			}
		}
	}
	// Large logits: the stable form stays finite and exact.
	xv := []float64{100, -100, 100, -100, 0, 30, -30}
	yv := []float64{0, 1, 1, 0, 0.5, 0.25, 0.75}
	for _, dt := range rowTypes {
		x := input(dt, kernels.Contiguous(7), func(i int) float64 { return xv[i] })
		y := input(dt, kernels.Contiguous(7), func(i int) float64 { return yv[i] })
		g := input(dt, kernels.Layout{}, func(int) float64 { return 1.5 })
		want := make([]float64, len(xv))
		for i := range want {
			want[i] = refBCELogits(xv[i], yv[i], 1)
		}
		s.result(t, fmt.Sprintf("%v large logits", dt), []*buf{dense(dt, 7), x, y, absent()}, 0, want, within(dt, 4e-6),
			func(be kernels.Backend, o []kernels.Operand) { be.BinaryCrossEntropyWithLogits(o[0], o[1], o[2], o[3]) })
		for _, wrt := range wrts {
			for i := range want {
				want[i] = refBCELogitsGrad(wrt, 1.5, xv[i], yv[i], 1)
			}
			s.result(t, fmt.Sprintf("%v large logits backward(%d)", dt, wrt), []*buf{dense(dt, 7), g, x, y, absent()}, 0, want, within(dt, 4e-6),
				func(be kernels.Backend, o []kernels.Operand) {
					be.BinaryCrossEntropyWithLogitsBackward(wrt, o[0], o[1], o[2], o[3], o[4])
				})
		}
	}
	s.result(t, "empty", []*buf{dense(dtype.F32, 0, 3), input(dtype.F32, kernels.Contiguous(0, 3), nil), imm(1), absent()}, 0, nil, exact,
		func(be kernels.Backend, o []kernels.Operand) { be.BinaryCrossEntropyWithLogits(o[0], o[1], o[2], o[3]) })
}
