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

// TestRowKernelsSameBitsAtAnyAlignment: a float32 row kernel that keeps its rows in
// registers moves 16 bytes a load only when every row operand is on 16 bytes; the
// other variant must compute the same bits, so that a view one element into its block
// gives what its copy gives. Rows of 1024 (a warp each) and 2048 (a block each);
// 1021 and 2045 (never 16-byte loads) against the references' tolerance only through
// TestConformance.
func TestRowKernelsSameBitsAtAnyAlignment(t *testing.T) {
	dev, al, b := gpu(t)
	m := gpuMemory{dev, al}
	const rows = 3
	for _, n := range []int{1024, 2048} {
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
			run    func(o []kernels.Operand)
		}{
			{"softmax", [][]float32{x}, func(o []kernels.Operand) { b.Softmax(o[1], o[0], rows, n, 1) }},
			{"log_softmax", [][]float32{x}, func(o []kernels.Operand) { b.LogSoftmax(o[1], o[0], rows, n, 1) }},
			{"softmax backward", [][]float32{g, x}, func(o []kernels.Operand) { b.SoftmaxBackward(o[2], o[0], o[1], rows, n, 1) }},
			{"log_softmax backward", [][]float32{g, x}, func(o []kernels.Operand) { b.LogSoftmaxBackward(o[2], o[0], o[1], rows, n, 1) }},
			{"layer_norm", [][]float32{x, w, bias, ms, rs}, func(o []kernels.Operand) {
				b.LayerNorm(o[5], o[3], o[4], o[0], o[1], o[2], rows, n, float64(float32(1e-5)))
			}},
			{"layer_norm backward", [][]float32{g, x, w, ms, rs}, func(o []kernels.Operand) {
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
					mem := m.Alloc(t, int64(4*(len(in)+off)))
					defer m.Free(t, mem)
					m.Write(t, mem, f32Bytes(append(make([]float32, off), in...)))
					ops[i] = kernels.Operand{Layout: kernels.Layout{Shape: []int{len(in)}, Strides: []int{1}, Offset: off}, DType: dtype.F32, Mem: mem}
				}
				c.run(ops)
				out := ops[len(ops)-1]
				got[off] = m.Read(t, out.Mem)[4*off:]
			}
			require.NoError(t, b.Check())
			assert.Equal(t, got[0], got[1], fmt.Sprintf("%s over rows of %d: bits at offset 0 and 1", c.name, n))
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
