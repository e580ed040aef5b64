package cuda

import (
	"fmt"

	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/kernels"
)

// Addc is kernels/cpu's Addc (src/math.cuh's addc_fn): value is rounded to the compute
// type on the host, as there (float32 unless an operand is F64), and every product
// and sum on its own.
func (b *Backend) Addc(op kernels.BinaryOp, dst, x, a, c kernels.Operand, value float64) {
	var name string
	switch op {
	case kernels.Mul:
		name = "addcmul"
	case kernels.Div:
		name = "addcdiv"
	default:
		panic(fmt.Sprintf("kernels/cuda: addc of %v; it takes mul or div", op))
	}
	f64 := in64(dst, x, a, c)
	b.elementwise(name, kAddc, f64, dst, []kernels.Operand{x, a, c}, cudadev.ArgInt32(int32(op)), number(f64, value))
}
