package cuda

import (
	"fmt"
	"math"

	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// The optimizer steps compute in the parameters' type, F32 or F64 (the gradient and the
// state are of it too), with every hyper-parameter rounded to it once on the host, as
// kernels/cpu's SGDStep and AdamStep round them.

func (b *Backend) SGD(c kernels.SGD, p, g, buf kernels.Operand, first bool) {
	const op = "sgd"
	n := p.Size()
	ft := rowType(p)
	pp, pg := rowsOf(op, "p", p, ft, n), rowsOf(op, "g", g, ft, n)
	var pb uint64
	if c.Momentum != 0 {
		if buf.Absent() {
			panic(fmt.Sprintf("kernels/cuda: %s: momentum %v without a momentum buffer", op, c.Momentum))
		}
		pb = rowsOf(op, "momentum buffer", buf, ft, n)
	}
	if n == 0 {
		return
	}
	f64 := ft == dtype.F64
	b.launch(kSGD.in(f64), b.grid(int64(n), p.Mem.Stream), cudadev.ArgUint64(pp), cudadev.ArgUint64(pg), cudadev.ArgUint64(pb),
		cudadev.ArgInt64(int64(n)), number(f64, c.LR), number(f64, c.Momentum), number(f64, c.Dampening),
		number(f64, c.WeightDecay), cudadev.ArgInt32(boolInt(c.Nesterov)), cudadev.ArgInt32(boolInt(first)))
}

// Adam computes the bias corrections on the host in float64, exactly as kernels/cpu's
// AdamStep does, and the per-element update on the GPU in the parameters' type.
func (b *Backend) Adam(c kernels.Adam, step int, p, g, m, v kernels.Operand) {
	const op = "adam"
	if step < 1 {
		panic("kernels/cuda: adam: step numbers start at 1")
	}
	n := p.Size()
	ft := rowType(p)
	pp, pg := rowsOf(op, "p", p, ft, n), rowsOf(op, "g", g, ft, n)
	pm, pv := rowsOf(op, "m", m, ft, n), rowsOf(op, "v", v, ft, n)
	if n == 0 {
		return
	}
	f64 := ft == dtype.F64
	bc1 := 1 - math.Pow(c.Beta1, float64(step))
	bc2 := 1 - math.Pow(c.Beta2, float64(step))
	decay := 1.0
	if c.Decoupled {
		decay = 1 - c.LR*c.WeightDecay
	}
	args := [15]cudadev.Arg{
		cudadev.ArgUint64(pp), cudadev.ArgUint64(pg), cudadev.ArgUint64(pm), cudadev.ArgUint64(pv), cudadev.ArgInt64(int64(n)),
		number(f64, c.Beta1), number(f64, c.Beta2), number(f64, 1-c.Beta1), number(f64, 1-c.Beta2),
		number(f64, c.Eps), number(f64, c.WeightDecay), number(f64, c.LR/bc1), number(f64, 1/math.Sqrt(bc2)),
		number(f64, decay), cudadev.ArgInt32(boolInt(c.Decoupled)),
	}
	b.launch(kAdam.in(f64), b.grid(int64(n), p.Mem.Stream), args[:]...)
}

func boolInt(v bool) int32 {
	if v {
		return 1
	}
	return 0
}
