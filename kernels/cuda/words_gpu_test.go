package cuda_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/cuda"
)

// TestWordKernelsSameBitsAsWalk: the kernels of contiguous 16-bit words (the cast to
// float32, GeluTanh) give the bits the general walk gives, which a view one element into
// its block takes (off the words' alignment), for every one of the 65536 inputs of F16
// and of BF16: NaNs, infinities and subnormals of both signs included.
func TestWordKernelsSameBitsAsWalk(t *testing.T) {
	dev, al, b := gpu(t)
	m := gpuMemory{dev, al}
	const n = 1 << 16
	in := make([]byte, 2*n)
	for i := range n {
		binary.LittleEndian.PutUint16(in[2*i:], uint16(i))
	}
	for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
		for _, c := range []struct {
			name string
			out  dtype.DType
			run  func(dst, x kernels.Operand)
		}{
			{"cast to F32", dtype.F32, func(dst, x kernels.Operand) { b.Copy(dst, x) }},
			{"GeluTanh", dt, func(dst, x kernels.Operand) { b.Unary(kernels.GeluTanh, dst, x) }},
		} {
			var got [2][]byte
			for off := range 2 {
				operand := func(t2 dtype.DType, data []byte) kernels.Operand {
					es := t2.Size()
					mem := m.Alloc(t, int64(es*(n+off)))
					m.Write(t, mem, append(make([]byte, es*off), data...))
					return kernels.Operand{Layout: kernels.Layout{Shape: []int{n / 8, 8}, Strides: []int{8, 1}, Offset: off}, DType: t2, Mem: mem}
				}
				x, dst := operand(dt, in), operand(c.out, make([]byte, c.out.Size()*n))
				c.run(dst, x)
				got[off] = m.Read(t, dst.Mem)[c.out.Size()*off:]
				m.Free(t, x.Mem)
				m.Free(t, dst.Mem)
			}
			require.NoError(t, b.Check())
			assert.Equal(t, got[1], got[0], fmt.Sprintf("%v %s: bits of the word kernel (offset 0) and the walk (offset 1)", dt, c.name))
		}
	}
	require.NoError(t, dev.Synchronize())
}

// TestSumAllOnePass: sum_all's one launch gives the float32 sum and mean of every element
// of a dense F16 or BF16 input, its last block combining the pieces serially (6 of them)
// and in a tree (96), launch after launch (the ticket is back to 0 after each). The
// values, multiples of 1/32 in [-8, 8), make every partial sum exact in float (a run of
// 8) and in double, so the result is the exact sum rounded once, whatever the order.
func TestSumAllOnePass(t *testing.T) {
	dev, al, b := gpu(t)
	m := gpuMemory{dev, al}
	for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
		for _, n := range []int{3 << 16, 96 << 15} {
			data, sum := make([]byte, 2*n), int64(0)
			for i := range n {
				k := int64(i*7919%512 - 256)
				sum += k
				h := dtype.F32ToF16(float32(k) / 32)
				if dt == dtype.BF16 {
					h = dtype.F32ToBF16(float32(k) / 32)
				}
				binary.LittleEndian.PutUint16(data[2*i:], h)
			}
			x := kernels.Operand{Layout: kernels.Contiguous(n), DType: dt, Mem: m.Alloc(t, int64(2*n))}
			m.Write(t, x.Mem, data)
			out := kernels.Operand{Layout: kernels.Contiguous(), DType: dtype.F32, Mem: m.Alloc(t, 4)}
			exact := float64(sum) / 32
			for run := range 3 {
				b.Sum(out, x)
				got := math.Float32frombits(binary.LittleEndian.Uint32(m.Read(t, out.Mem)))
				assert.Equal(t, float32(exact), got, "%v sum of %d, launch %d", dt, n, run)
				b.Mean(out, x)
				got = math.Float32frombits(binary.LittleEndian.Uint32(m.Read(t, out.Mem)))
				assert.Equal(t, float32(exact*(1/float64(n))), got, "%v mean of %d, launch %d", dt, n, run)
			}
			require.NoError(t, b.Check())
			m.Free(t, x.Mem)
			m.Free(t, out.Mem)
		}
	}
}

// TestMaxRowsSameBitsAsWalk: max_rows finds the values and positions reduce_warp finds
// (a view one element into its block takes the latter), over rows holding every F16 or
// BF16 bit pattern, shuffled: NaNs, infinities, signed zeros and ties; rows of 1024 (a
// round of words a lane), of 8192 (several rounds), of 264 and of 40 (rounds short of
// words, lanes without any).
func TestMaxRowsSameBitsAsWalk(t *testing.T) {
	dev, al, b := gpu(t)
	m := gpuMemory{dev, al}
	const all = 1 << 16
	for _, cols := range []int{1024, 8192, 264, 40} {
		rows := all / cols
		n := rows * cols
		in := make([]byte, 2*n)
		for i := range n {
			binary.LittleEndian.PutUint16(in[2*i:], uint16(i*7919))
		}
		for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
			var got [2][]byte
			for off := range 2 {
				x := kernels.Operand{Layout: kernels.Layout{Shape: []int{rows, cols}, Strides: []int{cols, 1}, Offset: off}, DType: dt, Mem: m.Alloc(t, int64(2*(n+off)))}
				m.Write(t, x.Mem, append(make([]byte, 2*off), in...))
				v := kernels.Operand{Layout: kernels.Contiguous(rows, 1), DType: dt, Mem: m.Alloc(t, int64(2*rows))}
				idx := kernels.Operand{Layout: kernels.Contiguous(rows, 1), DType: dtype.I64, Mem: m.Alloc(t, int64(8*rows))}
				b.Max(v, idx, x)
				got[off] = append(m.Read(t, v.Mem), m.Read(t, idx.Mem)...)
				for _, o := range []kernels.Operand{x, v, idx} {
					m.Free(t, o.Mem)
				}
			}
			require.NoError(t, b.Check())
			assert.Equal(t, got[1], got[0], "%v rows of %d: values and positions of max_rows (offset 0) and reduce_warp (offset 1)", dt, cols)
		}
	}
}

// sumOver runs Sum, Mean or SumSquares (mode 0, 1, 2) of the [rows, cols] matrix of dt
// whose elements are vals (rounded to dt already), placed off elements into its block
// (off 0: on 16 bytes), over dimension dim into float32, and returns the results.
func sumOver(t *testing.T, b *cuda.Backend, m gpuMemory, dt dtype.DType, vals []float64, rows, cols, off, dim, mode int) []float32 {
	t.Helper()
	n := rows * cols
	data := make([]byte, dt.Size()*(n+off))
	for i, v := range vals {
		switch dt {
		case dtype.F32:
			binary.LittleEndian.PutUint32(data[4*(i+off):], math.Float32bits(float32(v)))
		case dtype.F16:
			binary.LittleEndian.PutUint16(data[2*(i+off):], dtype.F32ToF16(float32(v)))
		default:
			binary.LittleEndian.PutUint16(data[2*(i+off):], dtype.F32ToBF16(float32(v)))
		}
	}
	x := kernels.Operand{Layout: kernels.Layout{Shape: []int{rows, cols}, Strides: []int{cols, 1}, Offset: off}, DType: dt, Mem: m.Alloc(t, int64(len(data)))}
	m.Write(t, x.Mem, data)
	shape := []int{1, cols}
	if dim == 1 {
		shape = []int{rows, 1}
	}
	nOut := shape[0] * shape[1]
	out := kernels.Operand{Layout: kernels.Contiguous(shape...), DType: dtype.F32, Mem: m.Alloc(t, int64(4*nOut))}
	[]func(dst, src kernels.Operand){b.Sum, b.Mean, b.SumSquares}[mode](out, x)
	raw := m.Read(t, out.Mem)
	got := make([]float32, nOut)
	for i := range got {
		got[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	m.Free(t, x.Mem)
	m.Free(t, out.Mem)
	require.NoError(t, b.Check())
	return got
}

// refSums returns the float64 sums (of squares for mode 2, means for mode 1) of vals,
// a [rows, cols] matrix, over dimension dim, and the sums of their magnitudes.
func refSums(vals []float64, rows, cols, dim, mode int) (want, mag []float64) {
	nOut := cols
	if dim == 1 {
		nOut = rows
	}
	want, mag = make([]float64, nOut), make([]float64, nOut)
	for i, v := range vals {
		o := i % cols
		if dim == 1 {
			o = i / cols
		}
		if mode == 2 {
			v *= v
		}
		want[o] += v
		mag[o] += math.Abs(v)
	}
	if mode == 1 {
		per := float64(len(vals) / nOut)
		for o := range want {
			want[o] *= 1 / per
			mag[o] *= 1 / per
		}
	}
	return want, mag
}

// sumShapes are the [rows, cols] matrices the word kernels' tests reduce: one row, one
// piece, pieces of a group half full, one group of many pieces (156: the last block
// combines 156 partials a column), columns in many groups (more than there are tickets,
// for 16-bit and float32 columns), rows of many words.
var sumShapes = [][2]int{{1, 8}, {7, 40}, {129, 1032}, {5000, 40}, {20000, 8}, {300, 16640}, {300, 8320}, {3, 8192}, {64, 1024}}

// TestWordSumsExact: sum_cols (Sum(0) on 16 bytes) and sum_rows (Sum(1) of 16-bit rows)
// give the exact sums, means and sums of squares of values k/32 (|k| <= 256), whose
// every partial sum is exact in float and in double whatever the order, rounded once:
// as the general kernels (the same matrix one element into its block) do, launch after
// launch (the tickets are back to 0 after each), for every type and shape of sumShapes.
func TestWordSumsExact(t *testing.T) {
	dev, al, b := gpu(t)
	m := gpuMemory{dev, al}
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		for _, sh := range sumShapes {
			rows, cols := sh[0], sh[1]
			vals := make([]float64, rows*cols)
			for i := range vals {
				vals[i] = float64(i*7919%513-256) / 32
			}
			for dim := range 2 {
				if dim == 1 && dt == dtype.F32 {
					continue // float32 rows keep reduce_warp
				}
				for mode := range 3 {
					want, _ := refSums(vals, rows, cols, dim, mode)
					for run := range 3 {
						for _, off := range []int{0, 1} {
							got := sumOver(t, b, m, dt, vals, rows, cols, off, dim, mode)
							for o, w := range want {
								require.Equal(t, float32(w), got[o], "%v [%d, %d] dim %d mode %d offset %d launch %d: output %d", dt, rows, cols, dim, mode, off, run, o)
							}
						}
					}
				}
			}
		}
	}
}

// TestWordSumsWithinTolerance: over values uniform in [-4, 4), sum_cols and sum_rows
// (their float runs included) stay within the conformance suite's tolerance of float64
// sums (1e-6 of the sum of magnitudes), as the general kernels do, and give the same
// bits launch after launch.
func TestWordSumsWithinTolerance(t *testing.T) {
	dev, al, b := gpu(t)
	m := gpuMemory{dev, al}
	r := rand.New(rand.NewPCG(1, 2))
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		for _, sh := range sumShapes {
			rows, cols := sh[0], sh[1]
			vals := make([]float64, rows*cols)
			for i := range vals {
				vals[i] = dt.Round(r.Float64()*8 - 4)
			}
			for dim := range 2 {
				for mode := range 3 {
					want, mag := refSums(vals, rows, cols, dim, mode)
					for _, off := range []int{0, 1} {
						got := sumOver(t, b, m, dt, vals, rows, cols, off, dim, mode)
						again := sumOver(t, b, m, dt, vals, rows, cols, off, dim, mode)
						require.Equal(t, got, again, "%v [%d, %d] dim %d mode %d offset %d: run again", dt, rows, cols, dim, mode, off)
						for o, w := range want {
							assert.InDelta(t, w, float64(got[o]), 1e-6*mag[o]+1e-30, "%v [%d, %d] dim %d mode %d offset %d: output %d", dt, rows, cols, dim, mode, off, o)
						}
					}
				}
			}
		}
	}
}

// TestTransposeWordsManyRounds: copy_transpose_words moves every element's bits where
// the grid goes round the tiles more than once (more tiles than the 32 blocks an SM it
// launches: 2 rounds for 16 bits, 4 for F32 on an H100's 132 SMs) and the last row and
// column of tiles are partial, from a column slice of a wider source, in F32 (I32 takes
// the same path), F16 and BF16. The conformance suite's transposes fit in one round.
func TestTransposeWordsManyRounds(t *testing.T) {
	dev, al, b := gpu(t)
	m := gpuMemory{dev, al}
	const rows, cols, ld = 8200, 4104, 8208 // the view [rows, cols], strides (1, ld)
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		e := dt.Size()
		tiles := ((rows + 128/e - 1) / (128 / e)) * ((cols + 63) / 64)
		require.Greater(t, tiles, 32*dev.Properties().Multiprocessors, "%v: the grid must go round the tiles", dt)
		in := make([]byte, cols*ld*e)
		for i := range cols * ld { // distinct patterns, NaN payloads among them
			var w [8]byte
			binary.LittleEndian.PutUint64(w[:], uint64(i+1)*0x9e3779b97f4a7c15)
			copy(in[i*e:], w[:e])
		}
		x := kernels.Operand{Layout: kernels.Layout{Shape: []int{rows, cols}, Strides: []int{1, ld}}, DType: dt, Mem: m.Alloc(t, int64(len(in)))}
		m.Write(t, x.Mem, in)
		dst := kernels.Operand{Layout: kernels.Contiguous(rows, cols), DType: dt, Mem: m.Alloc(t, int64(rows*cols*e))}
		b.Copy(dst, x)
		got := m.Read(t, dst.Mem)
		require.NoError(t, b.Check())
		bad := 0
		for r := range rows {
			for c := range cols {
				if !bytes.Equal(got[(r*cols+c)*e:(r*cols+c+1)*e], in[(r+c*ld)*e:(r+c*ld+1)*e]) {
					if bad++; bad <= 5 {
						t.Errorf("%v: element [%d, %d] differs", dt, r, c)
					}
				}
			}
		}
		assert.Zero(t, bad, "%v: elements that differ", dt)
		m.Free(t, x.Mem)
		m.Free(t, dst.Mem)
	}
}
