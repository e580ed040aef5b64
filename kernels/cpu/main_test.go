package cpu

import (
	"os"
	"testing"
)

// The package's thresholds for products, kept for the benchmarks that time them.
var defaultGemmSerial, defaultGemmWake = gemmSerial, gemmWake

// TestMain runs the package's tests with the parallel products of small matrices: the
// serial threshold is a tuning figure, and the tests' matrices are small.
func TestMain(m *testing.M) {
	gemmSerial, gemmWake = 64*64*64, 64*64*64
	os.Exit(m.Run())
}
