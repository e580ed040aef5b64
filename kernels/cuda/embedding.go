package cuda

import (
	"fmt"

	"github.com/subletml/sublet/device"
	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// embeddingVocab returns the rows of a table of dim columns, panicking like kernels/cpu
// when it is not whole rows.
func embeddingVocab(op string, table kernels.Operand, dim int) int {
	if dim <= 0 || table.Size()%dim != 0 {
		panic(fmt.Sprintf("kernels/cuda: %s: a table of %d floats is not whole rows of dim %d", op, table.Size(), dim))
	}
	return table.Size() / dim
}

// Embedding copies rows of the table's type (F32 or F64; dst is of it too) and returns
// nil: an index outside the table is found on the GPU and reported by the next Check as
// a *kernels.IndexError of "embedding" (its row is not written).
func (b *Backend) Embedding(dst, w, idx kernels.Operand, dim int) error {
	const op = "embedding"
	vocab := embeddingVocab(op, w, dim)
	count := idx.Size()
	ft := rowType(w)
	pd, pw, pi := rowsOf(op, "dst", dst, ft, count*dim), rowsOf(op, "weight", w, ft, vocab*dim), rowsOf(op, "idx", idx, i64, count)
	if count == 0 {
		return nil
	}
	flag, seq, ok := b.flagged()
	if !ok {
		return nil
	}
	defer b.done()
	b.launch(kEmbedding.in(ft == dtype.F64), b.grid(int64(count*dim), dst.Mem.Stream), cudadev.ArgUint64(pd), cudadev.ArgUint64(pw), cudadev.ArgUint64(pi),
		cudadev.ArgInt64(int64(count)), cudadev.ArgInt64(int64(dim)), cudadev.ArgInt64(int64(vocab)), cudadev.ArgUint64(flag), cudadev.ArgUint32(seq))
	return nil
}

// EmbeddingBackward adds in dw's type (F32 or F64; g is of it too) and returns nil; a
// bad index is reported by the next Check as one of "embedding backward". The rows
// of g are added in index order, as kernels/cpu adds them (src/embedding.cu: the
// indices sorted with their positions, then a pass per row), so dw is kernels/cpu's
// bit for bit and the same on every run. The sort's keys take the stream's scratch
// (up to 524288 indices), else a block of the caching allocator for the op's
// duration, as PyTorch's sort buffers do.
func (b *Backend) EmbeddingBackward(dw, g, idx kernels.Operand, dim int) error {
	const op = "embedding backward"
	vocab := embeddingVocab(op, dw, dim)
	count := idx.Size()
	ft := rowType(dw)
	pdw, pg, pi := rowsOf(op, "dw", dw, ft, vocab*dim), rowsOf(op, "g", g, ft, count*dim), rowsOf(op, "idx", idx, i64, count)
	if count == 0 {
		return nil
	}
	if int64(count) >= 1<<32 || int64(vocab) >= 1<<32-1 {
		panic(fmt.Sprintf("kernels/cuda: %s: %d indices into %d rows: the sort takes fewer than 2³² of each", op, count, vocab))
	}
	padded := int64(embeddingChunk)
	for padded < int64(count) {
		padded *= 2
	}
	s := dw.Mem.Stream
	keys, release, ok := b.embeddingKeys(op, padded*8, s)
	if !ok {
		return nil
	}
	defer release()
	flag, seq, ok := b.flagged()
	if !ok {
		return nil
	}
	defer b.done()
	pk := cudadev.ArgUint64(uint64(keys))
	b.launch(kEmbeddingKeys, b.grid(padded, s), pk, cudadev.ArgUint64(pi), cudadev.ArgInt64(int64(count)), cudadev.ArgInt64(padded),
		cudadev.ArgInt64(int64(vocab)), cudadev.ArgUint64(flag), cudadev.ArgUint32(seq))
	chunks := cudadev.LaunchConfig{Grid: cudadev.Dim3{X: uint32(padded / embeddingChunk)}, Block: cudadev.Dim3{X: block}, Stream: s}
	b.launch(kEmbeddingSortLocal, chunks, pk, cudadev.ArgInt64(0))
	for k := int64(2 * embeddingChunk); k <= padded; k *= 2 {
		for j := k / 2; j >= embeddingChunk; j /= 2 {
			b.launch(kEmbeddingSortGlobal, b.grid(padded/2, s), pk, cudadev.ArgInt64(padded), cudadev.ArgInt64(k), cudadev.ArgInt64(j))
		}
		b.launch(kEmbeddingSortLocal, chunks, pk, cudadev.ArgInt64(k))
	}
	b.launch(kEmbeddingBackward.in(ft == dtype.F64), rowsGrid(int64(count), 32, s), cudadev.ArgUint64(pdw), cudadev.ArgUint64(pg), pk,
		cudadev.ArgInt64(int64(count)), cudadev.ArgInt64(int64(dim)))
	return nil
}

// embeddingChunk is how many keys a block of the sort orders in shared memory
// (EMB_CHUNK of src/embedding.cu); the keys are padded to a power of two at least this.
const embeddingChunk = 2 * block

// embeddingKeys returns n bytes for the sort's keys on stream s, and what gives them
// back once the op's launches are made: the stream's scratch, locked, when they fit,
// else a block of the caching allocator (freed in stream order, so the kernels still
// own it). ok is false when neither can be had (the fault is kept for Check).
func (b *Backend) embeddingKeys(op string, n int64, s device.Stream) (keys device.Ptr, release func(), ok bool) {
	if n <= scratchBytes {
		sc, ok := b.useScratch(s)
		if !ok {
			return 0, nil, false
		}
		return sc.ptr, sc.mu.Unlock, true
	}
	p, err := b.al.Alloc(n, s)
	if err != nil {
		b.fault(fmt.Errorf("kernels/cuda: %s: %d bytes for the sort of the indices: %w", op, n, err))
		return 0, nil, false
	}
	return p, func() {
		if err := b.al.Free(p); err != nil {
			b.fault(err)
		}
	}, true
}
