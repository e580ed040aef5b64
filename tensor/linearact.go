package tensor

import (
	"fmt"

	"github.com/subletml/sublet/kernels"
)

// OpLinearRelu is the name of LinearActivation's op with ActRelu (beside the other
// Op* names: autocast.go).
const OpLinearRelu = "LinearRelu"

// Activation is the activation LinearActivation applies to a Linear's result.
type Activation uint8

// ActRelu is max(x, 0), Relu: the one activation LinearActivation takes. GELU is not
// one: cuBLASLt's GELU epilogue measured slower than the product followed by the
// gelu-tanh kernel (kernels/cuda's MatmulActivation has the figures), so a Linear
// followed by Gelu or GeluTanh runs as two ops.
const ActRelu Activation = 1

func (a Activation) String() string {
	if a == ActRelu {
		return "relu"
	}
	return fmt.Sprintf("Activation(%d)", uint8(a))
}

// rows are the activation's op row and that of the activation's own op.
func (a Activation) rows(op string) (fused, unary *OpInfo) {
	if a == ActRelu {
		return opLinearRelu, opRelu
	}
	panic(&Error{Op: op, Msg: fmt.Sprintf("activation %d: use tensor.ActRelu", a), Err: ErrShape})
}

// opLinearRelu is the row of LinearActivation with ActRelu.
var opLinearRelu = &OpInfo{Name: OpLinearRelu, MinInputs: 2, MaxInputs: 3,
	Saves: "x when the weight wants a gradient, the weight when x does, and its output", Autocast: AutocastLower}

// LinearActivation returns act(x·wᵀ + bias) as Linear followed by Relu (act ActRelu)
// returns it, in one op: where the backend folds the activation into the product
// (kernels.ActivationMatmul: cuBLASLt's epilogue on cuda, the GEMM's blocks while in the caches on cpu) the result is written once,
// in the product's pass, instead of the Linear's result being written, read back and
// the activation's written. Elsewhere it runs the two ops' kernels, with the same
// bits. nn.Sequential (and so nn.NewMLP) calls it for a Linear followed by ReLU.
//
// Recorded, it makes the two ops' nodes (a Linear's, then a Relu's, the result's
// grad_fn) and saves what they would: x when w needs a gradient, w when x does, and
// the ReLU's output, the result. The backward is then theirs, gradients and memory
// alike. The op holds no other memory: the ReLU is applied in place of the product.
func LinearActivation(x, w, bias *Tensor, act Activation) *Tensor {
	row, un := act.rows("LinearActivation")
	c, lin := beginLinear(row.Name, x, w, bias)
	var shapeRoom [smallRank]int
	// Recorded, the Linear's node saves x and w before the product runs, so that a
	// checkpoint's recomputation that needs them but not the result (checkpoint's early
	// stop, which fails the save of the last tensor it needs) ends before the product.
	var z *Tensor
	if c.recording() {
		z = &Tensor{dt: lin.dt} // no storage: only its node and, once out is made, its shape are read
		defer releaseProductNode(z)
		recordLinear(c, lin, z)
	}
	out := c.alloc(lin.dt, lin.shapeInto(shapeRoom[:0]))
	lin.place(c)
	if !lin.folded(c, un.unary, out) {
		lin.product(c, out)
		o := out.operand()
		c.k.Unary(un.unary, o, o)
	}
	if z != nil { // after computing, as the activation's node saves its output
		z.shape = out.shape
		ar := &unaryBackward{k: un.unary}
		c.recordIn(new(function), un.Name, []*Tensor{z}, ar, out, 2)
		ar.saved = c.save(out)
	}
	return c.done(out)
}

// recordLinear records the Linear's node of LinearActivation, with z, a handle that
// stands for the product that is never kept, as its output, and saves what its
// backward reads.
func recordLinear(c *call, lin linearCall, z *Tensor) {
	lr := &linearBackward{}
	c.recordIn(new(function), OpLinear, c.in, lr, z, 3)
	lr.x, lr.w = c.saveCross(lin.x, lin.w)
}

// releaseProductNode drops z's reference to the Linear's node: the activation's node,
// once recorded over z, holds its own.
func releaseProductNode(z *Tensor) {
	if n := z.node; n != nil {
		z.node = nil
		if err := n.Release(); err != nil {
			panic(fmt.Sprintf("tensor: internal error: releasing the node of a Linear's product: %v", err))
		}
	}
}

// folded writes k(x·wᵀ + bias) into out in the product's pass, and reports whether
// the backend could. In anomaly mode it does not: an epilogue's ReLU may turn a NaN
// into 0 (kernels.ActivationMatmul), and that mode is there to see where NaNs come
// from.
func (l linearCall) folded(c *call, k kernels.UnaryOp, out *Tensor) bool {
	am, ok := c.k.(kernels.ActivationMatmul)
	if !ok || c.s.m.anomaly {
		return false
	}
	var biasOp kernels.Operand
	if l.bias != nil {
		biasOp = l.bias.operand()
	}
	return am.MatmulActivation(k, l.rows(c, out), l.x2, l.wt, biasOp)
}
