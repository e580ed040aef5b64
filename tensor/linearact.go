package tensor

import (
	"fmt"

	"github.com/subletml/sublet/kernels"
)

// The names of LinearActivation's ops (beside the other Op* names: autocast.go).
const (
	OpLinearRelu     = "LinearRelu"     // with ActRelu
	OpLinearGeluTanh = "LinearGeluTanh" // with ActGeluTanh
)

// Activation is the activation LinearActivation applies to a Linear's result.
type Activation uint8

const (
	// ActRelu is max(x, 0), Relu.
	ActRelu Activation = iota + 1
	// ActGeluTanh is GELU's tanh approximation, GeluTanh: the GELU cuBLASLt's epilogue
	// computes. (PyTorch's default GELU, Gelu, is the erf form, which no epilogue has:
	// a Linear followed by it runs as two ops.)
	ActGeluTanh
)

func (a Activation) String() string {
	switch a {
	case ActRelu:
		return "relu"
	case ActGeluTanh:
		return "gelu_tanh"
	}
	return fmt.Sprintf("Activation(%d)", uint8(a))
}

// rows are the activation's op row and that of the activation's own op.
func (a Activation) rows(op string) (fused, unary *OpInfo) {
	switch a {
	case ActRelu:
		return opLinearRelu, opRelu
	case ActGeluTanh:
		return opLinearGeluTanh, opGeluTanh
	}
	panic(&Error{Op: op, Msg: fmt.Sprintf("activation %d: use tensor.ActRelu or tensor.ActGeluTanh", a), Err: ErrShape})
}

// The rows of the Linears with an activation.
var (
	opLinearRelu = &OpInfo{Name: OpLinearRelu, MinInputs: 2, MaxInputs: 3,
		Saves: "x when the weight wants a gradient, the weight when x does, and its output", Autocast: AutocastLower}
	opLinearGeluTanh = &OpInfo{Name: OpLinearGeluTanh, MinInputs: 2, MaxInputs: 3,
		Saves:    "x when the weight wants a gradient, the weight when x does, and x·wᵀ + bias (the GELU's input)",
		Autocast: AutocastLower, SavesExtra: true}
)

// LinearActivation returns act(x·wᵀ + bias) as Linear followed by Relu (act ActRelu)
// or GeluTanh (ActGeluTanh) returns it, in one op: where the backend folds the
// activation into the product (kernels.ActivationMatmul: cuBLASLt's epilogues on cuda)
// the result is written once, in the product's pass, instead of the Linear's result
// being written, read back and the activation's written. Elsewhere it runs the two
// ops' kernels, with the same bits. nn.Sequential (and so nn.NewMLP) calls it for a
// Linear followed by ReLU or GELU{Tanh: true}.
//
// Recorded, it makes the two ops' nodes (a Linear's, then a Relu's or Gelu's, the
// result's grad_fn) and saves what they would: x when w needs a gradient, w when x
// does, and the activation's tensor (ReLU its output, the result; GELU its input,
// x·wᵀ + bias). The backward is then theirs, gradients and memory alike. The op holds
// no other memory: a ReLU is applied in place of the product, and GELU's input is made
// only when the op records.
func LinearActivation(x, w, bias *Tensor, act Activation) *Tensor {
	row, un := act.rows("LinearActivation")
	c, lin := beginLinear(row.Name, x, w, bias)
	rec := c.recording()
	out := c.alloc(lin.dt, lin.shape)
	var pre *Tensor // the GELU's input, which its backward reads
	if act == ActGeluTanh && rec {
		pre = c.alloc(lin.dt, lin.shape)
	}
	lin.place(c)
	if !lin.folded(c, un.unary, out, pre) {
		z := out
		if pre != nil {
			z = pre
		}
		lin.product(c, z)
		c.k.Unary(un.unary, out.operand(), z.operand())
	}
	if rec { // after computing, as the activation's node saves a tensor it computes
		recordLinearActivation(c, lin, un, out, pre)
	}
	return c.done(out)
}

// recordLinearActivation records LinearActivation's result out as Linear and the
// activation act would have: the Linear's node, whose output is pre (GELU's input,
// which the activation's node saves; the op releases it) or, for ReLU, a handle
// standing for the product that was never written, then the activation's node over it.
func recordLinearActivation(c *call, lin linearCall, act *OpInfo, out, pre *Tensor) {
	z := pre
	if z == nil {
		z = &Tensor{shape: lin.shape, dt: lin.dt} // no storage: only its node is read
		defer func() {                            // the handle's reference: the activation's node holds its own
			if n := z.node; n != nil {
				z.node = nil
				if err := n.Release(); err != nil {
					panic(fmt.Sprintf("tensor: internal error: releasing the node of a Linear's product: %v", err))
				}
			}
		}()
	}
	lr := &linearBackward{}
	c.recordNode(OpLinear, c.in, lr, z, 3)
	lr.x, lr.w = c.saveCross(lin.x, lin.w)
	ar := &unaryBackward{k: act.unary}
	c.recordNode(act.Name, []*Tensor{z}, ar, out, 3)
	if pre != nil {
		ar.saved = c.save(pre)
		c.temp(pre) // its node and storage stay with the activation's node
		return
	}
	ar.saved = c.save(out)
}

// folded writes k(x·wᵀ + bias) into out, and x·wᵀ + bias into pre (nil for none), in
// the product's pass, and reports whether the backend could. In anomaly mode it does
// not: an epilogue's ReLU may turn a NaN into 0 (kernels.ActivationMatmul), and that
// mode is there to see where NaNs come from.
func (l linearCall) folded(c *call, k kernels.UnaryOp, out, pre *Tensor) bool {
	am, ok := c.k.(kernels.ActivationMatmul)
	if !ok || c.s.m.anomaly {
		return false
	}
	var preOp, biasOp kernels.Operand
	if pre != nil {
		preOp = l.rows(c, pre).operand()
	}
	if l.bias != nil {
		biasOp = l.bias.operand()
	}
	return am.MatmulActivation(k, l.rows(c, out).operand(), preOp, l.x2.operand(), l.wt.operand(), biasOp)
}
