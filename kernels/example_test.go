package kernels_test

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/cpu"
)

// A kernel sees operands: a memory block, a layout over it (in elements) and an
// element type. A transposed view is the same block with swapped strides; a stride of
// 0 broadcasts. Here the CPU backend (the reference every backend is checked against)
// adds a row vector to the transpose of a 2×3 matrix. Programs do not call backends:
// package tensor builds the operands from its storages and picks the backend.
func Example() {
	f32 := func(vs ...float32) kernels.Mem {
		b := make([]byte, 4*len(vs))
		for i, v := range vs {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return kernels.Mem{Host: b, Size: int64(len(b))}
	}
	m := kernels.Operand{Layout: kernels.Contiguous(2, 3), DType: dtype.F32, Mem: f32(1, 2, 3, 4, 5, 6)}
	mt := m
	mt.Layout = kernels.Layout{Shape: []int{3, 2}, Strides: []int{1, 3}} // the transpose: no copy
	row := kernels.Operand{Layout: kernels.Layout{Shape: []int{3, 2}, Strides: []int{0, 1}}, DType: dtype.F32, Mem: f32(10, 20)}
	dst := kernels.Operand{Layout: kernels.Contiguous(3, 2), DType: dtype.F32, Mem: f32(0, 0, 0, 0, 0, 0)}
	fmt.Println("matrix:       ", m.Layout)
	fmt.Println("its transpose:", mt.Layout)
	fmt.Println("a row, broadcast:", row.Layout)

	var be kernels.Backend = cpu.NewBackend(nil)
	be.Binary(kernels.Add, dst, mt, row)
	out := make([]float32, 6)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(dst.Mem.Host[4*i:]))
	}
	fmt.Println(be.Name(), out)
	// Output:
	// matrix:        shape [2 3] strides [3 1] offset 0
	// its transpose: shape [3 2] strides [1 3] offset 0
	// a row, broadcast: shape [3 2] strides [0 1] offset 0
	// cpu [11 24 12 25 13 26]
}
