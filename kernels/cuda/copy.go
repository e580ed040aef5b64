package cuda

import (
	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
	"github.com/subletml/sublet/kernels/cpu"
)

// Copy converts through float64 when dst or src is F64 (F64 to F16 or BF16 rounds
// once), through float32 otherwise, as kernels/cpu's Copy does.
func (b *Backend) Copy(dst, src kernels.Operand) {
	const op = "copy"
	requireWritable(op, dst)
	var w walk
	if !newWalk(op, &w, dst, src) {
		return
	}
	if dst.DType == src.DType && dst.Size() == src.Size() && dst.IsContiguous() && src.IsContiguous() {
		// The same bytes in the same order: the driver's device-to-device copy,
		// which moves them at the memory's rate (the walk's kernel reached 86% of it
		// in F32).
		if err := b.copyOnDevice(b.ptrOf(dst), b.ptrOf(src), int64(dst.Size()*dst.DType.Size()), dst.Mem.Stream); err != nil {
			b.fault(err)
		}
		return
	}
	if dst.DType == src.DType && w.rank == 2 && w.stride[0][1] == 1 && w.stride[1][0] == 1 && w.shape[0] > 1 && w.shape[1] > 1 {
		// A transposed view made dense: tiles through shared memory, of 16-byte words
		// where the tiles' edges allow.
		k, rows, cols := kCopyTranspose, int64(hdrTile), int64(hdrTile)
		if w.transposeWords(dst.DType.Size()) {
			k, rows, cols = kCopyTransposeWords, int64(128/dst.DType.Size()), hdrTwordsCols
		}
		tiles := ((w.shape[0] + rows - 1) / rows) * ((w.shape[1] + cols - 1) / cols)
		b.launch(k, cudadev.LaunchConfig{Grid: cudadev.Dim3{X: uint32(min(tiles, int64(32*b.sms)))}, Block: cudadev.Dim3{X: block},
			Stream: dst.Mem.Stream}, cudadev.ArgBytes(w.bytes()))
		return
	}
	if dst.DType == dtype.F32 && src.DType.Is16() && w.denseWords(4, 16, 8) &&
		b.launchWords(kCastToF32.of16(src.DType), hdrCastU, w.size/4, w.base[0], w.base[1], dst.Mem.Stream) {
		// 16-bit to float32, both dense (4 elements: 16 bytes out, 8 in): a kernel of
		// its own, at the memory's rate where copy_f32_i32 reaches 87% of it.
		return
	}
	b.launchWalk(kCopy.in(in64(dst, src)), &w, dst)
}

// transposeWords reports whether copy_transpose_words takes w, a transposed walk of two
// dimensions with elements of size bytes: 2 or 4 bytes, and every row of the output
// and every column of the source whole 16-byte words, aligned.
func (w *walk) transposeWords(size int) bool {
	if size != 2 && size != 4 {
		return false
	}
	v := int64(16 / size)
	return w.shape[0]%v == 0 && w.shape[1]%v == 0 && w.stride[0][0]%v == 0 && w.stride[1][1]%v == 0 && (w.base[0]|w.base[1])%16 == 0
}

// Fill converts v to dst's type on the host (kernels/cpu.FillBits), then writes that pattern: a
// memset where it is zero and dst is dense, a kernel otherwise.
func (b *Backend) Fill(dst kernels.Operand, v float64) {
	const op = "fill"
	requireWritable(op, dst)
	bits := cpu.FillBits(dst.DType, v)
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
