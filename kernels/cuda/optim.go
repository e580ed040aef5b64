package cuda

import (
	"fmt"
	"math"

	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/kernels"
)

func (b *Backend) SGD(c kernels.SGD, p, g, buf kernels.Operand, first bool) {
	const op = "sgd"
	n := p.Size()
	pp, pg := rowsOf(op, "p", p, f32, n), rowsOf(op, "g", g, f32, n)
	var pb uint64
	if c.Momentum != 0 {
		if buf.Absent() {
			panic(fmt.Sprintf("kernels/cuda: %s: momentum %v without a momentum buffer", op, c.Momentum))
		}
		pb = rowsOf(op, "momentum buffer", buf, f32, n)
	}
	if n == 0 {
		return
	}
	b.launch(kSGD, b.grid(int64(n), p.Mem.Stream), cudadev.ArgUint64(pp), cudadev.ArgUint64(pg), cudadev.ArgUint64(pb),
		cudadev.ArgInt64(int64(n)), cudadev.ArgFloat32(float32(c.LR)), cudadev.ArgFloat32(float32(c.Momentum)), cudadev.ArgFloat32(float32(c.Dampening)),
		cudadev.ArgFloat32(float32(c.WeightDecay)), cudadev.ArgInt32(boolInt(c.Nesterov)), cudadev.ArgInt32(boolInt(first)))
}

// Adam computes the bias corrections on the host in float64, exactly as kernels/cpu's
// AdamStep does, and the per-element update on the GPU in float32.
func (b *Backend) Adam(c kernels.Adam, step int, p, g, m, v kernels.Operand) {
	const op = "adam"
	if step < 1 {
		panic("kernels/cuda: adam: step numbers start at 1")
	}
	n := p.Size()
	pp, pg := rowsOf(op, "p", p, f32, n), rowsOf(op, "g", g, f32, n)
	pm, pv := rowsOf(op, "m", m, f32, n), rowsOf(op, "v", v, f32, n)
	if n == 0 {
		return
	}
	bc1 := 1 - math.Pow(c.Beta1, float64(step))
	bc2 := 1 - math.Pow(c.Beta2, float64(step))
	decay := float32(1)
	if c.Decoupled {
		decay = float32(1 - c.LR*c.WeightDecay)
	}
	args := [15]cudadev.Arg{
		cudadev.ArgUint64(pp), cudadev.ArgUint64(pg), cudadev.ArgUint64(pm), cudadev.ArgUint64(pv), cudadev.ArgInt64(int64(n)),
		cudadev.ArgFloat32(float32(c.Beta1)), cudadev.ArgFloat32(float32(c.Beta2)),
		cudadev.ArgFloat32(float32(1 - c.Beta1)), cudadev.ArgFloat32(float32(1 - c.Beta2)),
		cudadev.ArgFloat32(float32(c.Eps)), cudadev.ArgFloat32(float32(c.WeightDecay)),
		cudadev.ArgFloat32(float32(c.LR / bc1)), cudadev.ArgFloat32(float32(1 / math.Sqrt(bc2))),
		cudadev.ArgFloat32(decay), cudadev.ArgInt32(boolInt(c.Decoupled)),
	}
	b.launch(kAdam, b.grid(int64(n), p.Mem.Stream), args[:]...)
}

func boolInt(v bool) int32 {
	if v {
		return 1
	}
	return 0
}
