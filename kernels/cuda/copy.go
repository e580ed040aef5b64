package cuda

import (
	"encoding/binary"

	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/cpu"
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

// Fill converts v to dst's type on the host with kernels/cpu's Fill (so the bits are
// the CPU's), then writes that pattern: a memset where it is zero and dst is dense, a
// kernel otherwise.
func (b *Backend) Fill(dst kernels.Operand, v float64) {
	const op = "fill"
	requireWritable(op, dst)
	var pattern [8]byte
	cpu.Fill(cpu.FromBytes(dst.DType, pattern[:dst.DType.Size()], kernels.Layout{}), v)
	bits := binary.LittleEndian.Uint64(pattern[:])
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
