package kernelstest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// The row kernels over 16-bit storage (kernels.Backend: F16 or BF16 row operands
// compute in float32, each output rounded once) must give the bits of converting the
// operands to F32, running the F32 kernel and rounding its outputs: rows16 runs each
// case both ways on the target and compares bit for bit, at element offsets that put
// the rows on 16, 8 and 2 bytes.

// halves are the 16-bit storage types of the row kernels.
var halves = []dtype.DType{dtype.F16, dtype.BF16}

// rowOp is one operand of a rows16 case: a row operand (of the storage type under
// test, or F32 in the reference run) unless fixed is set, which keeps its type in both
// runs (statistics, labels, the loss); output marks what the case compares (an input
// too when v is set: in place).
type rowOp struct {
	fixed  dtype.DType
	n      int
	v      func(int) float64 // an input's values; nil for an output
	output bool
	absent bool
	scalar bool // one element of shape [] (a loss, its gradient)
}

// rowIn is a row input of n elements drawn from v, rowOut a row output.
func rowIn(n int, v func(int) float64) rowOp { return rowOp{n: n, v: v} }
func rowOut(n int) rowOp                     { return rowOp{n: n, output: true} }

// statIn and statOut are F32 operands (layer norm's mean and rstd, lse, dw, db).
func statIn(n int, v func(int) float64) rowOp { return rowOp{fixed: dtype.F32, n: n, v: v} }
func statOut(n int) rowOp                     { return rowOp{fixed: dtype.F32, n: n, output: true} }

// absentOp is an absent operand.
var absentOp = rowOp{absent: true}

// rows16 runs f with ops stored in h at element offset off (the fixed ones at 0) and
// with them in F32, and requires every output of the first run to hold the second's
// bits rounded once to its type, and nothing outside it written.
func (s *suite) rows16(t *testing.T, name string, h dtype.DType, off int, ops []rowOp, f kernelCall) {
	t.Helper()
	var native, ref []*buf
	for _, o := range ops {
		if o.absent {
			native, ref = append(native, absent()), append(ref, absent())
			continue
		}
		dt, l := o.fixed, kernels.Contiguous(o.n)
		if o.scalar {
			l = kernels.Layout{}
		}
		rl := l // the reference's, at offset 0
		if dt == dtype.Invalid {
			dt, l.Offset = h, off
		}
		if o.v == nil {
			native, ref = append(native, out(dt, l)), append(ref, out(o.fixed32(), rl))
			continue
		}
		in := input(dt, l, o.v)
		vals := in.vals()
		native, ref = append(native, in), append(ref, input(o.fixed32(), rl, func(i int) float64 { return vals[i] }))
	}
	got, want := exec(t, s.tg, native, f), exec(t, s.tg, ref, f)
	require.NoError(t, s.check())
	for i, o := range ops {
		if !o.output {
			continue
		}
		what := fmt.Sprintf("%s %v offset %d: operand %d", name, h, off, i)
		w := ref[i].values(want[i])
		// The block as it was, with the output's elements the reference's, rounded.
		rounded := &buf{dt: native[i].dt, l: native[i].l, data: append([]byte(nil), native[i].data...)}
		for k, e := range offsets(rounded.l) {
			put(rounded.dt, rounded.data, e, w[k])
		}
		if string(rounded.data) == string(got[i]) {
			continue
		}
		sz := rounded.dt.Size()
		for e := range len(got[i]) / sz {
			require.Equal(t, rounded.data[e*sz:(e+1)*sz], got[i][e*sz:(e+1)*sz], "%s: element %d of the block (the layout's offset %d): want %v, got %v",
				what, e, rounded.l.Offset, get(rounded.dt, rounded.data, e), get(rounded.dt, got[i], e))
		}
	}
}

// fixed32 is the operand's type in the reference run.
func (o rowOp) fixed32() dtype.DType {
	if o.fixed != dtype.Invalid {
		return o.fixed
	}
	return dtype.F32
}

// rows16Offsets are the element offsets the 16-bit cases run at: rows on 16 bytes
// (cuda: 16-byte loads where n allows), on 8 and on 2.
var rows16Offsets = []int{0, 4, 1}

func testRows16(t *testing.T, s *suite) {
	// Rows of 5, 200, 700 and 1024 (cuda: a warp each, in registers), 1500, 1501, 2048,
	// 4096 (a block, in registers: 16-bit rows in the block4 form, float32 ones in the
	// block form), 4104 and 8192 (the block form), 8195 and 8200 (a block reading its
	// row from memory), columns (inner > 1), none.
	shapes := [][3]int{{3, 5, 1}, {2, 200, 1}, {3, 700, 1}, {2, 1024, 1}, {2, 1500, 1}, {2, 1501, 1}, {2, 2048, 1},
		{2, 4096, 1}, {1, 4104, 1}, {1, 8192, 1}, {2, 8195, 1}, {1, 8200, 1}, {2, 7, 3}, {2, 300, 5}, {0, 4, 1}}
	for _, h := range halves {
		for _, off := range rows16Offsets {
			for _, sz := range shapes {
				outer, n, inner := sz[0], sz[1], sz[2]
				size := outer * n * inner
				for _, log := range []bool{false, true} {
					name := fmt.Sprintf("softmax %v log=%v", sz, log)
					// A wide range, so that the sums' order shows in their roundings.
					x := rowIn(size, s.uniform(-30, 30))
					fwd := func(be kernels.Backend, dst, x kernels.Operand) {
						if log {
							be.LogSoftmax(dst, x, outer, n, inner)
						} else {
							be.Softmax(dst, x, outer, n, inner)
						}
					}
					s.rows16(t, name, h, off, []rowOp{rowOut(size), x}, func(be kernels.Backend, o []kernels.Operand) { fwd(be, o[0], o[1]) })
					in := x
					in.output = true
					s.rows16(t, name+" in place", h, off, []rowOp{in}, func(be kernels.Backend, o []kernels.Operand) { fwd(be, o[0], o[0]) })
					bwd := func(be kernels.Backend, dx, g, y kernels.Operand) {
						if log {
							be.LogSoftmaxBackward(dx, g, y, outer, n, inner)
						} else {
							be.SoftmaxBackward(dx, g, y, outer, n, inner)
						}
					}
					y := s.uniform(0, 2.0/float64(max(n, 1)))
					if log {
						y = s.uniform(-12, 0)
					}
					g := rowIn(size, s.uniform(-1, 1))
					s.rows16(t, name+" backward", h, off, []rowOp{rowOut(size), g, rowIn(size, y)},
						func(be kernels.Backend, o []kernels.Operand) { bwd(be, o[0], o[1], o[2]) })
					g.output = true
					s.rows16(t, name+" backward in place", h, off, []rowOp{g, rowIn(size, y)},
						func(be kernels.Backend, o []kernels.Operand) { bwd(be, o[0], o[0], o[1]) })
				}
			}
			testLayerNorm16(t, s, h, off)
			testCrossEntropy16(t, s, h, off)
		}
	}
}

func testLayerNorm16(t *testing.T, s *suite, h dtype.DType, off int) {
	eps := float64(float32(1e-5))
	// As testRows16's rows, and many rows (dw and db summed in pieces).
	for _, sz := range [][2]int{{3, 7}, {3, 8}, {2, 200}, {3, 700}, {2, 1024}, {2, 1500}, {2, 1501}, {2, 4096}, {1, 4104}, {1, 8192}, {1, 8195},
		{1, 8200}, {2100, 5}, {0, 4}} {
		rows, n := sz[0], sz[1]
		for _, affine := range []bool{true, false} {
			name := fmt.Sprintf("layer_norm %v affine=%v", sz, affine)
			w, b := absentOp, absentOp
			if affine {
				w, b = rowIn(n, s.uniform(0.5, 1.5)), rowIn(n, s.uniform(-1, 1))
			}
			x := rowIn(rows*n, s.uniform(-3, 3))
			s.rows16(t, name, h, off, []rowOp{rowOut(rows * n), statOut(rows), statOut(rows), x, w, b},
				func(be kernels.Backend, o []kernels.Operand) {
					be.LayerNorm(o[0], o[1], o[2], o[3], o[4], o[5], rows, n, eps)
				})
			xin := x
			xin.output = true
			s.rows16(t, name+" in place", h, off, []rowOp{xin, statOut(rows), statOut(rows), w, b},
				func(be kernels.Backend, o []kernels.Operand) {
					be.LayerNorm(o[0], o[1], o[2], o[0], o[3], o[4], rows, n, eps)
				})

			g := rowIn(rows*n, s.uniform(-1, 1))
			mean, rstd := statIn(rows, s.uniform(-0.5, 0.5)), statIn(rows, s.uniform(0.5, 2))
			s.rows16(t, name+" backward", h, off, []rowOp{rowOut(rows * n), statOut(n), statOut(n), g, x, mean, rstd, w},
				func(be kernels.Backend, o []kernels.Operand) {
					be.LayerNormBackward(o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7], rows, n)
				})
			g.output = true
			s.rows16(t, name+" backward dx in place", h, off, []rowOp{g, x, mean, rstd, w},
				func(be kernels.Backend, o []kernels.Operand) {
					be.LayerNormBackward(o[0], kernels.Operand{}, kernels.Operand{}, o[0], o[1], o[2], o[3], o[4], rows, n)
				})
		}
	}
}

// testCrossEntropy16 runs cross-entropy over 16-bit logits (lse F32) with ceShapes'
// rows and more: in one block of the cuda forward and in several, for a warp and for a
// block, in registers' row lengths and beyond.
func testCrossEntropy16(t *testing.T, s *suite, h dtype.DType, off int) {
	const ignore = -100
	for _, sz := range append([][2]int{{5, 1024}, {3, 4096}, {2, 4104}, {5, 9000}}, ceShapes...) {
		n, c := sz[0], sz[1]
		labels := rowOp{fixed: dtype.I64, n: n, v: ceLabels(n, c, ignore)}
		x := rowIn(n*c, s.uniform(-20, 20))
		name := fmt.Sprintf("cross_entropy [%d, %d]", n, c)
		// The loss is of the logits' type, as tensor.CrossEntropy makes it.
		s.rows16(t, name, h, off, []rowOp{{fixed: h, n: 1, output: true, scalar: true}, statOut(n + 1), x, labels},
			func(be kernels.Backend, o []kernels.Operand) {
				require.NoError(t, be.CrossEntropy(o[0], o[1], o[2], o[3], n, c, ignore))
			})
		lse := statIn(n+1, func(i int) float64 {
			if i == n {
				return float64(n - (n+1)/5) // the rows that count
			}
			return 1 + float64(i%24)
		})
		gv := rowOp{fixed: h, n: 1, scalar: true, v: func(int) float64 { return 1.5 }}
		s.rows16(t, name+" backward", h, off, []rowOp{rowOut(n * c), x, lse, labels, gv},
			func(be kernels.Backend, o []kernels.Operand) {
				be.CrossEntropyBackward(o[0], o[1], o[2], o[3], o[4], n, c, ignore)
			})
	}
}
