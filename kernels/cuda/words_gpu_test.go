package cuda_test

import (
	"encoding/binary"
	"fmt"
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
