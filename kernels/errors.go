package kernels

import "fmt"

// IndexError reports an index (a class label, an embedding row) outside its range. A
// backend that returns it from the call has written nothing.
type IndexError struct {
	Op    string // the kernel: "cross_entropy", "embedding", …
	Pos   int    // position of the bad index in the index operand, row-major
	Index int64  // its value
	Limit int    // valid indices are [0, Limit)
}

func (e *IndexError) Error() string {
	return fmt.Sprintf("%s: index %d at position %d is outside [0, %d)", e.Op, e.Index, e.Pos, e.Limit)
}
