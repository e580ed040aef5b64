package cuda

import (
	"fmt"

	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/kernels"
)

// The binary cross-entropy kernels (src/math.cuh's bce_*): kernels/cpu's bce.go
// elementwise over dst's shape, x, y and the positive weight broadcast to it.

// BinaryCrossEntropy returns nil: the x outside [0, 1] or NaN are counted on the GPU and
// reported by the next Check as a *kernels.RangeError of "binary_cross_entropy" with
// their count (every loss is written meanwhile, as kernels/cpu writes them).
func (b *Backend) BinaryCrossEntropy(dst, x, y kernels.Operand) error {
	const op = "binary_cross_entropy"
	var w walk
	if !floatWalk(op, &w, dst, x, y) {
		return nil
	}
	flag, seq, ok := b.flagged()
	if !ok {
		return nil
	}
	defer b.done()
	b.launchWalk(kBCE.in(in64(dst, x, y)), &w, dst, cudadev.ArgUint64(flag), cudadev.ArgUint32(seq))
	return nil
}

func (b *Backend) BinaryCrossEntropyBackward(wrt kernels.Arg, dst, g, x, y kernels.Operand) {
	checkArg("binary_cross_entropy backward", wrt)
	b.elementwise("binary_cross_entropy backward", kBCEBackward, in64(dst, g, x, y), dst, []kernels.Operand{g, x, y}, cudadev.ArgInt32(int32(wrt)))
}

func (b *Backend) BinaryCrossEntropyWithLogits(dst, x, y, pw kernels.Operand) {
	b.elementwise("binary_cross_entropy_with_logits", kBCELogits, in64(dst, x, y, pw), dst, []kernels.Operand{x, y, posWeight(pw)})
}

// BinaryCrossEntropyWithLogitsBackward runs in one pass over its five operands, where
// kernels/cpu (four operands a pass) computes the input gradient's factor into a buffer
// first: the same roundings, no temporary. It computes in float64 when any of the five
// is F64, the target too where its gradient does not read it, as kernels/cpu chooses.
func (b *Backend) BinaryCrossEntropyWithLogitsBackward(wrt kernels.Arg, dst, g, x, y, pw kernels.Operand) {
	const op = "binary_cross_entropy_with_logits backward"
	checkArg(op, wrt)
	f64 := in64(dst, g, x, y, pw)
	if wrt == kernels.ArgB {
		y = kernels.Operand{} // the target's gradient does not read it, nor does kernels/cpu's
	}
	b.elementwise(op, kBCELogitsBackward, f64, dst, []kernels.Operand{g, x, y, posWeight(pw)}, cudadev.ArgInt32(int32(wrt)))
}

// posWeight is pw, or an immediate 1 for an absent one (no weighting): an absent
// operand of a walk reads as 0.
func posWeight(pw kernels.Operand) kernels.Operand {
	if pw.Absent() {
		return kernels.Scalar(1)
	}
	return pw
}

// checkArg panics unless wrt names an argument, naming op.
func checkArg(op string, wrt kernels.Arg) {
	if !wrt.Valid() {
		panic(fmt.Sprintf("kernels/cuda: %s: unknown argument %d", op, wrt))
	}
}
