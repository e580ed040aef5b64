package cpu

import "fmt"

// Embedding gathers rows of weight (a [vocab, dim] row-major table, vocab =
// len(weight)/dim) into dst: row i of dst ([len(idx), dim]) is row idx[i] of weight. An
// index outside [0, vocab) is an *kernels.IndexError, and then nothing is written.
func Embedding[T float](dst, weight []T, dim int, idx []int64) error {
	const op = "embedding"
	checkLen(op, "dst", len(dst), len(idx)*dim)
	vocab := embeddingVocab(op, weight, dim)
	if err := checkIndices(op, idx, vocab, NoIgnore); err != nil {
		return err
	}
	parallelFor(len(idx), max(1, grain/max(dim, 1)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			r := int(idx[i])
			copy(dst[i*dim:(i+1)*dim], weight[r*dim:(r+1)*dim])
		}
	})
	return nil
}

// EmbeddingBackward adds row i of g ([len(idx), dim]) into row idx[i] of dw (the
// weight's gradient, [vocab, dim]) for every i: a scatter-add; zero dw first for a
// fresh gradient. Repeated indices add in index order (columns are split across
// goroutines, never rows), so the result is deterministic. An index outside
// [0, vocab) is an *kernels.IndexError, and then nothing is written.
func EmbeddingBackward[T float](dw, g []T, dim int, idx []int64) error {
	const op = "embedding backward"
	checkLen(op, "g", len(g), len(idx)*dim)
	vocab := embeddingVocab(op, dw, dim)
	if err := checkIndices(op, idx, vocab, NoIgnore); err != nil {
		return err
	}
	const cols = 64 // columns per task: a cache line of float32s or more
	blocks := (dim + cols - 1) / cols
	parallelFor(blocks, max(1, grain/max(len(idx)*cols, 1)), func(lo, hi int) {
		j0, j1 := lo*cols, min(hi*cols, dim)
		for i, r := range idx {
			dst := dw[int(r)*dim+j0 : int(r)*dim+j1]
			src := g[i*dim+j0 : i*dim+j1]
			for j, v := range src {
				dst[j] += v
			}
		}
	})
	return nil
}

func embeddingVocab[T float](op string, table []T, dim int) int {
	if dim <= 0 || len(table)%dim != 0 {
		panic(fmt.Sprintf("kernels/cpu: %s: a table of %d floats is not whole rows of dim %d", op, len(table), dim))
	}
	return len(table) / dim
}
