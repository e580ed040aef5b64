package cuda_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// TestRowKernelsSameBitsAtAnyAlignment: a row kernel that keeps its rows in registers
// moves 16 bytes a load only when every row operand is on 16 bytes; the other variant
// must compute the same bits, so that a view one element into its block gives what
// its copy gives. Rows of float32, F16 and BF16 of 1024 (a warp each), 2048 and 4096
// (a block each; 16-bit rows: the block4 form) and 8192 (the block form); 1021 and
// 2045 (never 16-byte loads) against the references' tolerance only through
// TestConformance, where 16-bit rows must also give the bits of their float32 copy.
func TestRowKernelsSameBitsAtAnyAlignment(t *testing.T) {
	dev, al, b := gpu(t)
	m := gpuMemory{dev, al}
	const rows = 3
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		for _, n := range []int{1024, 2048, 4096, 8192} {
			vals := func(seed, size int) []float32 {
				v := make([]float32, size)
				for i := range v {
					v[i] = float32(math.Sin(float64(seed*7919+i)) * 3)
				}
				return v
			}
			x, g := vals(1, rows*n), vals(2, rows*n)
			w, bias := vals(3, n), vals(4, n)
			ms, rs := make([]float32, rows), make([]float32, rows)
			cases := []struct {
				name   string
				inputs [][]float32 // then one output of rows·n
				stats  int         // the last inputs that are float32 statistics, whatever dt
				run    func(o []kernels.Operand)
			}{
				{"softmax", [][]float32{x}, 0, func(o []kernels.Operand) { b.Softmax(o[1], o[0], rows, n, 1) }},
				{"log_softmax", [][]float32{x}, 0, func(o []kernels.Operand) { b.LogSoftmax(o[1], o[0], rows, n, 1) }},
				{"softmax backward", [][]float32{g, x}, 0, func(o []kernels.Operand) { b.SoftmaxBackward(o[2], o[0], o[1], rows, n, 1) }},
				{"log_softmax backward", [][]float32{g, x}, 0, func(o []kernels.Operand) { b.LogSoftmaxBackward(o[2], o[0], o[1], rows, n, 1) }},
				{"layer_norm", [][]float32{x, w, bias, ms, rs}, 2, func(o []kernels.Operand) {
					b.LayerNorm(o[5], o[3], o[4], o[0], o[1], o[2], rows, n, float64(float32(1e-5)))
				}},
				{"layer_norm backward", [][]float32{g, x, w, ms, rs}, 2, func(o []kernels.Operand) {
					b.LayerNormBackward(o[5], kernels.Operand{}, kernels.Operand{}, o[0], o[1], o[3], o[4], o[2], rows, n)
				}},
			}
			for _, c := range cases {
				// The statistics of layer norm's backward are the forward's; any values
				// serve the comparison as long as both runs get the same.
				for i := range ms {
					ms[i], rs[i] = 0.1*float32(i), 1+0.5*float32(i)
				}
				var got [2][]byte
				for off := range 2 {
					ops := make([]kernels.Operand, len(c.inputs)+1)
					for i, in := range append(c.inputs, make([]float32, rows*n)) {
						odt, o := dt, off
						if i >= len(c.inputs)-c.stats && i < len(c.inputs) {
							odt, o = dtype.F32, 0
						}
						es := odt.Size()
						mem := m.Alloc(t, int64(es*(len(in)+o)))
						defer m.Free(t, mem)
						m.Write(t, mem, append(make([]byte, es*o), rowBytes(odt, in)...))
						ops[i] = kernels.Operand{Layout: kernels.Layout{Shape: []int{len(in)}, Strides: []int{1}, Offset: o}, DType: odt, Mem: mem}
					}
					c.run(ops)
					out := ops[len(ops)-1]
					got[off] = m.Read(t, out.Mem)[dt.Size()*off:]
				}
				require.NoError(t, b.Check())
				assert.Equal(t, got[0], got[1], fmt.Sprintf("%s over %v rows of %d: bits at offset 0 and 1", c.name, dt, n))
			}
		}
	}
}

func f32Bytes(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(f))
	}
	return out
}

// rowBytes stores v as dt (F32, F16 or BF16), little-endian.
func rowBytes(dt dtype.DType, v []float32) []byte {
	if dt == dtype.F32 {
		return f32Bytes(v)
	}
	out := make([]byte, 2*len(v))
	for i, f := range v {
		h := dtype.F32ToBF16(f)
		if dt == dtype.F16 {
			h = dtype.F32ToF16(f)
		}
		binary.LittleEndian.PutUint16(out[2*i:], h)
	}
	return out
}

// TestCrossEntropySameBitsAtAnyAlignment: cross-entropy's forward keeps rows of up to
// 8192 in registers, 16 bytes a load when the logits are on 16 bytes, and its backward
// moves 16-byte words when the logits and dlogits are; the other variants (the logits
// one element into their block) must give the same bits: lse, the loss and dlogits, in
// F32, F16 and BF16, for rows of a warp (1024), of a block (2048 and 4096: 16-bit
// rows take the block4 form) and 8192 (the block form). A label out of
// range found by the word kernel is reported as the walk reports it.
func TestCrossEntropySameBitsAtAnyAlignment(t *testing.T) {
	dev, al, b := gpu(t)
	m := gpuMemory{dev, al}
	const rows = 5
	labels := []int64{3, -100, 1000, 7, 0}
	lab := make([]byte, 8*rows)
	for i, l := range labels {
		binary.LittleEndian.PutUint64(lab[8*i:], uint64(l))
	}
	scalar := func(dt dtype.DType, v float32) kernels.Operand {
		mem := m.Alloc(t, 8)
		m.Write(t, mem, append(rowBytes(dt, []float32{v}), make([]byte, 8-dt.Size())...))
		return kernels.Operand{Layout: kernels.Layout{}, DType: dt, Mem: mem}
	}
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		for _, n := range []int{1024, 2048, 4096, 8192} {
			x := make([]float32, rows*n)
			for i := range x {
				x[i] = float32(math.Sin(float64(i)*0.37) * 6)
			}
			var got [2][3][]byte // lse, the loss, dlogits
			for off := range 2 {
				es := dt.Size()
				vec := func(dt dtype.DType, data []byte, off int) kernels.Operand {
					mem := m.Alloc(t, int64(len(data)+dt.Size()*off))
					m.Write(t, mem, append(make([]byte, dt.Size()*off), data...))
					return kernels.Operand{Layout: kernels.Layout{Shape: []int{len(data) / dt.Size()}, Strides: []int{1}, Offset: off}, DType: dt, Mem: mem}
				}
				logits, dl := vec(dt, rowBytes(dt, x), off), vec(dt, make([]byte, es*rows*n), off)
				lse, lb := vec(dtype.F32, make([]byte, 4*(rows+1)), 0), vec(dtype.I64, lab, 0)
				loss, g := scalar(dt, 0), scalar(dtype.F32, 1.5)
				require.NoError(t, b.CrossEntropy(loss, lse, logits, lb, rows, n, -100))
				b.CrossEntropyBackward(dl, logits, lse, lb, g, rows, n, -100)
				require.NoError(t, b.Check())
				got[off] = [3][]byte{m.Read(t, lse.Mem), m.Read(t, loss.Mem)[:es], m.Read(t, dl.Mem)[es*off:]}
				for _, o := range []kernels.Operand{logits, dl, lse, lb, loss, g} {
					m.Free(t, o.Mem)
				}
			}
			for k, what := range []string{"lse", "the loss", "dlogits"} {
				assert.Equal(t, got[0][k], got[1][k], "%v cross-entropy over rows of %d: %s's bits at offset 0 and 1", dt, n, what)
			}
		}
		// A label out of range: the backward's word kernel reports it (row 2's, the
		// first bad one) and writes zeros for its row.
		for off := range 2 {
			bad := slices.Clone(lab)
			binary.LittleEndian.PutUint64(bad[8*2:], uint64(1024+5))
			mem := m.Alloc(t, int64(dt.Size()*(rows*1024+off)))
			logits := kernels.Operand{Layout: kernels.Layout{Shape: []int{rows * 1024}, Strides: []int{1}, Offset: off}, DType: dt, Mem: mem}
			lseMem, lbMem := m.Alloc(t, 4*(rows+1)), m.Alloc(t, 8*rows)
			m.Write(t, lseMem, make([]byte, 4*(rows+1)))
			m.Write(t, lbMem, bad)
			lse := kernels.Operand{Layout: kernels.Contiguous(rows + 1), DType: dtype.F32, Mem: lseMem}
			lb := kernels.Operand{Layout: kernels.Contiguous(rows), DType: dtype.I64, Mem: lbMem}
			g := scalar(dtype.F32, 1)
			b.CrossEntropyBackward(logits, logits, lse, lb, g, rows, 1024, -100)
			var ie *kernels.IndexError
			require.ErrorAs(t, b.Check(), &ie, "%v at offset %d", dt, off)
			assert.Equal(t, kernels.IndexError{Op: "cross_entropy backward", Pos: 2, Index: 1029, Limit: 1024}, *ie, "%v at offset %d", dt, off)
			for _, mm := range []kernels.Mem{mem, lseMem, lbMem, g.Mem} {
				m.Free(t, mm)
			}
		}
	}
	require.NoError(t, dev.Synchronize())
}

// TestCrossEntropyNonFiniteRows: the register-row forward takes a 16-bit row's maximum
// on its bits when the row is whole 16-byte words and element by element otherwise;
// either way a row holding a NaN has a NaN lse, one holding +Inf +Inf, one of -Inf
// -Inf, and a row with some -Inf the log-sum-exp of the others, the same bits at
// offset 0 and 1 (F32, F16, BF16; rows of 1024, a warp each, and 2048, a block).
func TestCrossEntropyNonFiniteRows(t *testing.T) {
	dev, al, b := gpu(t)
	m := gpuMemory{dev, al}
	const rows = 4
	lab := make([]byte, 8*rows) // every label 0
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		for _, n := range []int{1024, 2048} {
			x := make([]float32, rows*n)
			var want float64 // row 3's lse, from its values as stored
			for j := range n {
				v := float32(math.Sin(float64(j)*0.37) * 6)
				for r := range rows {
					x[r*n+j] = v
				}
				x[2*n+j] = float32(math.Inf(-1))
				if j%3 == 0 {
					x[3*n+j] = float32(math.Inf(-1))
				}
			}
			x[5] = float32(math.NaN())
			x[n+7] = float32(math.Inf(1))
			stored := rowBytes(dt, x[3*n:])
			mx := math.Inf(-1)
			vals := make([]float64, n)
			for j := range n {
				vals[j] = storedValue(dt, stored, j)
				mx = math.Max(mx, vals[j])
			}
			for _, v := range vals {
				want += math.Exp(v - mx)
			}
			want = mx + math.Log(want)
			var got [2][]byte
			for off := range 2 {
				es := dt.Size()
				mem := m.Alloc(t, int64(es*(rows*n+off)))
				m.Write(t, mem, append(make([]byte, es*off), rowBytes(dt, x)...))
				logits := kernels.Operand{Layout: kernels.Layout{Shape: []int{rows * n}, Strides: []int{1}, Offset: off}, DType: dt, Mem: mem}
				lseMem, lbMem, lossMem := m.Alloc(t, 4*(rows+1)), m.Alloc(t, 8*rows), m.Alloc(t, 8)
				m.Write(t, lbMem, lab)
				lse := kernels.Operand{Layout: kernels.Contiguous(rows + 1), DType: dtype.F32, Mem: lseMem}
				lb := kernels.Operand{Layout: kernels.Contiguous(rows), DType: dtype.I64, Mem: lbMem}
				loss := kernels.Operand{Layout: kernels.Layout{}, DType: dtype.F32, Mem: lossMem}
				require.NoError(t, b.CrossEntropy(loss, lse, logits, lb, rows, n, -100))
				require.NoError(t, b.Check())
				got[off] = m.Read(t, lseMem)
				for _, mm := range []kernels.Mem{mem, lseMem, lbMem, lossMem} {
					m.Free(t, mm)
				}
			}
			what := fmt.Sprintf("%v cross-entropy over rows of %d", dt, n)
			assert.Equal(t, got[0], got[1], "%s: lse's bits at offset 0 and 1", what)
			lse := func(i int) float64 { return float64(math.Float32frombits(binary.LittleEndian.Uint32(got[0][4*i:]))) }
			assert.True(t, math.IsNaN(lse(0)), "%s: a row with a NaN: lse %v", what, lse(0))
			assert.Equal(t, math.Inf(1), lse(1), "%s: a row with +Inf", what)
			assert.Equal(t, math.Inf(-1), lse(2), "%s: a row of -Inf", what)
			assert.InDelta(t, want, lse(3), 1e-5*math.Abs(want), "%s: a row with some -Inf", what)
		}
	}
	require.NoError(t, dev.Synchronize())
}

// storedValue is element i of a row stored as dt by rowBytes, as float64.
func storedValue(dt dtype.DType, data []byte, i int) float64 {
	switch dt {
	case dtype.F16:
		return float64(dtype.F16ToF32(binary.LittleEndian.Uint16(data[2*i:])))
	case dtype.BF16:
		return float64(dtype.BF16ToF32(binary.LittleEndian.Uint16(data[2*i:])))
	}
	return float64(math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])))
}
