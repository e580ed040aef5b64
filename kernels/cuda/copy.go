package cuda

import (
	"math"

	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

func (b *Backend) Copy(dst, src kernels.Operand) {
	const op = "copy"
	requireWritable(op, dst)
	var w walk
	if !newWalk(op, &w, dst, src) {
		return
	}
	b.launchWalk(kCopy, &w, dst)
}

// Fill converts v to dst's type on the host (fillBits), then writes that pattern: a
// memset where it is zero and dst is dense, a kernel otherwise.
func (b *Backend) Fill(dst kernels.Operand, v float64) {
	const op = "fill"
	requireWritable(op, dst)
	bits := fillBits(dst.DType, v)
	n := int64(dst.Size())
	if n == 0 {
		return
	}
	if bits == 0 && dst.IsContiguous() {
		if err := b.memset(b.ptrOf(dst), n*int64(dst.DType.Size()), dst.Mem.Stream); err != nil {
			b.fault(err)
		}
		return
	}
	var w walk
	newWalk(op, &w, dst)
	b.launchWalk(kFill, &w, dst, cudadev.ArgUint64(bits))
}

// fillBits is v converted to dt as kernels/cpu's Fill converts a float64, as the bits
// of one element: floats through float32 rounded to nearest even, integers truncated
// toward zero and saturated with NaN to 0, Bool v != 0. (The conformance suite checks
// the two agree bit for bit.)
func fillBits(dt dtype.DType, v float64) uint64 {
	switch dt {
	case dtype.F32:
		return uint64(math.Float32bits(float32(v)))
	case dtype.F16:
		return uint64(dtype.F32ToF16(float32(v)))
	case dtype.BF16:
		return uint64(dtype.F32ToBF16(float32(v)))
	case dtype.I32:
		return uint64(uint32(int32(saturate(v, math.MinInt32, math.MaxInt32))))
	case dtype.I64:
		return uint64(saturate(v, math.MinInt64, math.MaxInt64))
	case dtype.Bool:
		if v != 0 {
			return 1
		}
	}
	return 0
}

// saturate converts f to an integer in [lo, hi]: truncation toward zero, NaN to 0.
// float64(hi) may round up (2⁶³ for MaxInt64); every float below it converts exactly.
func saturate(f float64, lo, hi int64) int64 {
	switch {
	case f != f:
		return 0
	case f <= float64(lo):
		return lo
	case f >= float64(hi):
		return hi
	}
	return int64(f)
}
