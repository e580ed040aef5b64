//go:build !amd64

package tensor

import "runtime"

// callers is callers_amd64.go's through runtime.Callers: skip it, callers and the
// function calling callers.
func callers(pcs []uintptr) int { return runtime.Callers(3, pcs) }
