package cuda

import (
	"fmt"

	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// The comparison family (src/compare.cu): Compare, Where and the exact integer Sum,
// each over a Walk as the elementwise kernels are. A Scalar reaches these kernels as
// its exact value, which the kernel rounds to the comparison's type itself (newWalk
// rounds immediates to the output's type, and a Bool or integer output has none).

func (b *Backend) Compare(op kernels.CompareOp, dst, x, y kernels.Operand) {
	if !op.Valid() {
		panic(fmt.Sprintf("kernels/cuda: unknown %v", op))
	}
	name := op.String()
	requireType(name, dst, dtype.Bool)
	in := kernels.CompareType(x, y)
	if in == dtype.I64 {
		requireIntegers(name, x, y)
	}
	var w walk
	if exactWalk(name, &w, dst, x, y) {
		b.launchWalk(kCompare, &w, dst, cudadev.ArgInt32(int32(op)), cudadev.ArgInt32(int32(in)))
	}
}

// Where selects into a float output over the compute type kernels/cpu uses (float64
// when dst, a or b is F64), into an integer or Bool one exactly.
func (b *Backend) Where(dst, cond, x, y kernels.Operand) {
	const op = "where"
	if dst.DType.IsFloat() {
		b.elementwise(op, kWhere, in64(dst, x, y), dst, []kernels.Operand{cond, x, y})
		return
	}
	requireWritable(op, dst)
	requireIntegers(op, x, y)
	var w walk
	if exactWalk(op, &w, dst, cond, x, y) {
		b.launchWalk(kWhereInt, &w, dst)
	}
}

// sumInts is Sum into an I64 dst: dst is zeroed, then every element of src is added
// to its output (the walk is over src's shape, dst broadcast over the reduced
// dimensions).
func (b *Backend) sumInts(dst, src kernels.Operand) {
	const op = "sum"
	requireType(op, dst, dtype.I64)
	requireIntegers(op, src)
	b.Fill(dst, 0)
	var w walk
	if newWalk(op, &w, src, dst) {
		b.launchWalk(kSumInt, &w, dst)
	}
}

// requireType panics unless o is a writable output of type dt.
func requireType(op string, o kernels.Operand, dt dtype.DType) {
	requireWritable(op, o)
	if o.DType != dt {
		panic(fmt.Sprintf("kernels/cuda: %s: output must be %v, not %v", op, dt, o.DType))
	}
}

// requireIntegers panics unless every operand is of an integer type or Bool, or a
// Scalar holding an integer.
func requireIntegers(op string, ops ...kernels.Operand) {
	for _, o := range ops {
		v, imm := o.ScalarValue()
		if imm && !kernels.IsInteger(v) || !imm && o.DType != dtype.I32 && o.DType != dtype.I64 && o.DType != dtype.Bool {
			panic(fmt.Sprintf("kernels/cuda: %s: an integer operation on %v (a Scalar %v); it takes integers and Bool", op, o.DType, v))
		}
	}
}

// exactWalk is newWalk with each Scalar input's exact value as its immediate.
func exactWalk(op string, w *walk, out kernels.Operand, ins ...kernels.Operand) bool {
	ok := newWalk(op, w, out, ins...)
	for k, in := range ins {
		if v, imm := in.ScalarValue(); imm {
			w.imm[k+1] = v
		}
	}
	return ok
}
