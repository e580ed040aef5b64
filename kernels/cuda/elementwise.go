package cuda

import (
	"fmt"
	"math"

	"github.com/subletml/sublet/device"
	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/kernels"
)

// elementwise launches the variant of kernel k (a formWalk base) computing in float64
// when f64 (in64 of the op's operands) over dst and the inputs, which broadcast to it,
// with the extra scalar arguments after the Walk.
func (b *Backend) elementwise(op string, k kernel, f64 bool, dst kernels.Operand, ins []kernels.Operand, extra ...cudadev.Arg) {
	var w walk
	if floatWalk(op, &w, dst, ins...) {
		b.launchWalk(k.in(f64), &w, dst, extra...)
	}
}

// floatWalk checks that dst is a writable float output and fills w with the walk of
// dst and the inputs (newWalk); false: no element, nothing to launch.
func floatWalk(op string, w *walk, dst kernels.Operand, ins ...kernels.Operand) bool {
	requireFloat(op, dst)
	return newWalk(op, w, dst, ins...)
}

// launchWalk launches the 32- or 64-bit index variant of kernel k (of its compute
// type already) over w on the stream of out, the first output, with w then the extra
// arguments.
func (b *Backend) launchWalk(k kernel, w *walk, out kernels.Operand, extra ...cudadev.Arg) {
	items := w.size
	if w.rank == 1 { // the kernels take hdrUnroll elements a thread per round (map_k)
		items = (w.size + hdrUnroll - 1) / hdrUnroll
	}
	cfg := b.grid(items, out.Mem.Stream)
	if w.wide(int64(cfg.Grid.X) * block * hdrUnroll) {
		k += vWide
	}
	var args [4]cudadev.Arg
	args[0] = cudadev.ArgBytes(w.bytes())
	n := 1 + copy(args[1:], extra)
	b.launch(k, cfg, args[:n]...)
}

// launchWords launches kernel k, a map_words kernel (src/common.cuh) taking u words a
// thread per round, over n words from src to dst on stream s, and reports whether it
// did: false when its int indices would pass 2³¹-1 (the caller takes its general path).
func (b *Backend) launchWords(k kernel, u, n int64, dst, src uint64, s device.Stream) bool {
	cfg := b.grid((n+u-1)/u, s)
	if n+int64(cfg.Grid.X)*block*u > math.MaxInt32 {
		return false
	}
	b.launch(k, cfg, cudadev.ArgUint64(src), cudadev.ArgUint64(dst), cudadev.ArgInt32(int32(n)))
	return true
}

// Unary runs GeluTanh over contiguous F16 or BF16 operands of one type (16-byte words
// on 16 bytes) by a kernel for that op alone (gelu_tanh_f16, _bf16), the same
// arithmetic as the general kernel's; everything else by the general kernel.
func (b *Backend) Unary(op kernels.UnaryOp, dst, x kernels.Operand) {
	if !op.Valid() {
		panic(fmt.Sprintf("kernels/cuda: unknown %v", op))
	}
	var w walk
	if !floatWalk(op.String(), &w, dst, x) {
		return
	}
	if op == kernels.GeluTanh && dst.DType.Is16() && x.DType == dst.DType &&
		w.denseWords(8, 16, 16) && b.launchWords(kGeluTanh16.of16(dst.DType), hdrGeluU, w.size/8, w.base[0], w.base[1], dst.Mem.Stream) {
		return
	}
	b.launchWalk(kUnary.in(in64(dst, x)), &w, dst, cudadev.ArgInt32(int32(op)))
}

// backwardNames name the backward kernels in messages, made once so that an op does
// not build its name each call.
var (
	unaryBackwardNames = func() (n [kernels.GeluErf + 1]string) {
		for op := kernels.Neg; op.Valid(); op++ {
			n[op] = op.String() + " backward"
		}
		return n
	}()
	binaryBackwardNames = func() (n [kernels.Minimum + 1]string) {
		for op := kernels.Add; op.Valid(); op++ {
			n[op] = op.String() + " backward"
		}
		return n
	}()
)

func (b *Backend) UnaryBackward(op kernels.UnaryOp, dx, g, saved kernels.Operand) {
	if !op.Valid() {
		panic(fmt.Sprintf("kernels/cuda: unknown %v", op))
	}
	b.elementwise(unaryBackwardNames[op], kUnaryBackward, in64(dx, g, saved), dx, []kernels.Operand{g, saved}, cudadev.ArgInt32(int32(op)))
}

func (b *Backend) Binary(op kernels.BinaryOp, dst, x, y kernels.Operand) {
	if !op.Valid() {
		panic(fmt.Sprintf("kernels/cuda: unknown %v", op))
	}
	b.elementwise(op.String(), kBinary, in64(dst, x, y), dst, []kernels.Operand{x, y}, cudadev.ArgInt32(int32(op)))
}

func (b *Backend) BinaryBackward(op kernels.BinaryOp, wrt kernels.Arg, dst, g, x, y kernels.Operand) {
	if !op.Valid() || !wrt.Valid() {
		panic(fmt.Sprintf("kernels/cuda: unknown %v or argument %d", op, wrt))
	}
	b.elementwise(binaryBackwardNames[op], kBinaryBackward, in64(dst, g, x, y), dst, []kernels.Operand{g, x, y},
		cudadev.ArgInt32(int32(op)), cudadev.ArgInt32(int32(wrt)))
}

func (b *Backend) Axpy(dst kernels.Operand, alpha float64, x kernels.Operand) {
	f64 := in64(dst, x)
	b.elementwise("axpy", kAxpy, f64, dst, []kernels.Operand{dst, x}, number(f64, alpha))
}

// Dropout's scale is 1/(1-p) computed in the kernel's type from p rounded to it, as
// kernels/cpu computes it.
func (b *Backend) Dropout(dst, x, mask kernels.Operand, p float64) {
	f64 := in64(dst, x)
	scale := cudadev.ArgFloat32(dropoutScale[float32](p))
	if f64 {
		scale = cudadev.ArgFloat64(dropoutScale[float64](p))
	}
	b.elementwise("dropout", kDropout, f64, dst, []kernels.Operand{x, mask}, scale)
}

// dropoutScale is kernels/cpu's dropout scale in T: 1/(1-p) with p rounded to T, 0 for
// p = 1.
func dropoutScale[T float32 | float64](p float64) T {
	if p < 1 {
		return 1 / (1 - T(p))
	}
	return 0
}

// DropoutMask's threshold is p·2³² with p rounded to float32, kernels/cpu's rule, so
// that every backend draws the same mask for a p.
func (b *Backend) DropoutMask(mask kernels.Operand, p float64, seed uint64) {
	const op = "dropout"
	if !(p >= 0 && p <= 1) {
		panic(fmt.Sprintf("kernels/cuda: %s: probability %v outside [0, 1]", op, p))
	}
	m := rowOperand(op, mask, bool8)
	n := int64(mask.Size())
	if n == 0 {
		return
	}
	thr := uint64(math.Ldexp(float64(float32(p)), 32))
	b.launch(kDropoutMask, b.grid((n+3)/4, mask.Mem.Stream),
		cudadev.ArgUint64(m), cudadev.ArgInt64(n), cudadev.ArgUint64(seed), cudadev.ArgUint64(thr))
}

func (b *Backend) Unscale(g kernels.Operand, inv float64, found kernels.Operand) {
	const op = "unscale"
	requireFloat(op, g)
	f := rowOperand(op, found, f32)
	if found.Size() != 1 {
		panic(fmt.Sprintf("kernels/cuda: %s: the found flag has %d elements, want 1", op, found.Size()))
	}
	var w walk
	if !newWalk(op, &w, g) {
		return
	}
	f64 := in64(g)
	b.launchWalk(kUnscale.in(f64), &w, g, number(f64, inv), cudadev.ArgUint64(f))
}

// NonFinite runs on x's stream and waits for it: the answer is read back. x is read in
// its own precision (an F64 beyond float32's range is finite).
func (b *Backend) NonFinite(x kernels.Operand) bool {
	const op = "non_finite"
	checkOperand(op, x)
	var w walk
	if !newWalk(op, &w, x) {
		return false
	}
	s := x.Mem.Stream
	sc, ok := b.useScratch(s)
	if !ok {
		return false
	}
	defer sc.mu.Unlock()
	if err := b.memset(sc.ptr, 4, s); err != nil {
		b.fault(err)
		return false
	}
	b.launchWalk(kNonFinite.in(in64(x)), &w, x, cudadev.ArgPtr(sc.ptr))
	var found [4]byte
	if err := b.copyToHost(found[:], sc.ptr, s); err != nil {
		b.fault(err)
		return false
	}
	return found != [4]byte{}
}
