package cpu

import (
	"fmt"

	"github.com/subletml/sublet/kernels"
)

// checkIndices returns a *kernels.IndexError for the first index outside [0, limit)
// that is not skip.
func checkIndices(op string, idx []int64, limit int, skip int64) error {
	for i, v := range idx {
		if (v < 0 || v >= int64(limit)) && v != skip {
			return &kernels.IndexError{Op: op, Pos: i, Index: v, Limit: limit}
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
