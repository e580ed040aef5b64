package cpu

import "fmt"

// IndexError reports an index (a class label, an embedding row) outside its range. The
// kernel that returns it has written nothing.
type IndexError struct {
	Op    string // the kernel: "cross_entropy", "embedding", …
	Pos   int    // position of the bad index in the index slice
	Index int64  // its value
	Limit int    // valid indices are [0, Limit)
}

func (e *IndexError) Error() string {
	return fmt.Sprintf("kernels/cpu: %s: index %d at position %d is outside [0, %d)", e.Op, e.Index, e.Pos, e.Limit)
}

// checkIndices returns an *IndexError for the first index outside [0, limit) that is
// not skip.
func checkIndices(op string, idx []int64, limit int, skip int64) error {
	for i, v := range idx {
		if (v < 0 || v >= int64(limit)) && v != skip {
			return &IndexError{Op: op, Pos: i, Index: v, Limit: limit}
		}
	}
	return nil
}

// checkLen panics unless a slice has the length a kernel's sizes imply.
func checkLen(op, what string, have, want int) {
	if have != want {
		panic(fmt.Sprintf("kernels/cpu: %s: %s has %d elements, want %d", op, what, have, want))
	}
}
