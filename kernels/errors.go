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

// RangeError reports input values outside the domain an op is defined on (a
// probability outside [0, 1]). A backend may report it after writing its output.
type RangeError struct {
	Op     string  // the kernel: "binary_cross_entropy", …
	Count  int     // how many elements are outside (NaN included)
	Lo, Hi float64 // the domain, [Lo, Hi]
}

func (e *RangeError) Error() string {
	return fmt.Sprintf("%s: %d input elements are outside [%g, %g] or NaN; all elements of the input should be between %g and %g",
		e.Op, e.Count, e.Lo, e.Hi, e.Lo, e.Hi)
}
