package kernelstest_test

import (
	"testing"

	"github.com/subletml/sublet/kernels/cpu"
	"github.com/subletml/sublet/kernels/kernelstest"
)

// TestCPU proves the CPU backend (the reference every other backend is compared with)
// against the suite's float64 references.
func TestCPU(t *testing.T) {
	kernelstest.Run(t, kernelstest.Target{Backend: cpu.NewBackend(nil), Memory: kernelstest.HostMemory()})
}
