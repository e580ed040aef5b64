package cuda

import (
	"fmt"

	cudadev "github.com/subletml/sublet/device/cuda"
	"github.com/subletml/sublet/dtype"
	"github.com/subletml/sublet/kernels"
)

// embeddingThreads is about how many threads EmbeddingBackward spreads the table over
// (columns × parts of rows).
const embeddingThreads = 1 << 16

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
// bad index is reported by the next Check as one of "embedding backward".
func (b *Backend) EmbeddingBackward(dw, g, idx kernels.Operand, dim int) error {
	const op = "embedding backward"
	vocab := embeddingVocab(op, dw, dim)
	count := idx.Size()
	ft := rowType(dw)
	pdw, pg, pi := rowsOf(op, "dw", dw, ft, vocab*dim), rowsOf(op, "g", g, ft, count*dim), rowsOf(op, "idx", idx, i64, count)
	if count == 0 {
		return nil
	}
	parts := min(max(1, (embeddingThreads+dim-1)/dim), vocab)
	rowsPerPart := (vocab + parts - 1) / parts
	parts = (vocab + rowsPerPart - 1) / rowsPerPart
	flag, seq, ok := b.flagged()
	if !ok {
		return nil
	}
	defer b.done()
	b.launch(kEmbeddingBackward.in(ft == dtype.F64), b.grid(int64(dim*parts), dw.Mem.Stream), cudadev.ArgUint64(pdw), cudadev.ArgUint64(pg), cudadev.ArgUint64(pi),
		cudadev.ArgInt64(int64(count)), cudadev.ArgInt64(int64(dim)), cudadev.ArgInt64(int64(vocab)), cudadev.ArgInt64(int64(rowsPerPart)),
		cudadev.ArgUint64(flag), cudadev.ArgUint32(seq))
	return nil
}
