package cpu

import (
	"os"
	"testing"
)

// The package's thresholds, kept for the benchmarks that time them.
var defaultGrain, defaultGemmGrain, defaultGemmWake = grain, gemmGrain, gemmWake

// TestMain runs the package's tests with the parallel products of small matrices: the
// serial threshold is a tuning figure, and the tests' matrices are small.
func TestMain(m *testing.M) {
	gemmGrain, gemmWake = 64*64*64/16, 64*64*64
	cores = maxProcsOfTests
	os.Exit(m.Run())
}
