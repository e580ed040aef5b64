package cuda_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
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
// values, multiples of 1/32 in [-8, 8), make every partial sum exact in double, so the
// result is the exact sum rounded once, whatever the order.
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
// (a view one element into its block takes the latter), over rows of 1024 holding every
// F16 or BF16 bit pattern once, shuffled: NaNs, infinities, signed zeros and ties.
func TestMaxRowsSameBitsAsWalk(t *testing.T) {
	dev, al, b := gpu(t)
	m := gpuMemory{dev, al}
	const n, cols = 1 << 16, 1024
	in := make([]byte, 2*n)
	for i := range n {
		binary.LittleEndian.PutUint16(in[2*i:], uint16(i*7919))
	}
	for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
		var got [2][]byte
		for off := range 2 {
			x := kernels.Operand{Layout: kernels.Layout{Shape: []int{n / cols, cols}, Strides: []int{cols, 1}, Offset: off}, DType: dt, Mem: m.Alloc(t, int64(2*(n+off)))}
			m.Write(t, x.Mem, append(make([]byte, 2*off), in...))
			v := kernels.Operand{Layout: kernels.Contiguous(n/cols, 1), DType: dt, Mem: m.Alloc(t, 2*n/cols)}
			idx := kernels.Operand{Layout: kernels.Contiguous(n/cols, 1), DType: dtype.I64, Mem: m.Alloc(t, 8*n/cols)}
			b.Max(v, idx, x)
			got[off] = append(m.Read(t, v.Mem), m.Read(t, idx.Mem)...)
			for _, o := range []kernels.Operand{x, v, idx} {
				m.Free(t, o.Mem)
			}
		}
		require.NoError(t, b.Check())
		assert.Equal(t, got[1], got[0], "%v: values and positions of max_rows (offset 0) and reduce_warp (offset 1)", dt)
	}
}
