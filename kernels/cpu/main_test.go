package cpu

import (
	"fmt"
	"os"
	"strconv"
	"testing"
)

// The package's thresholds for products, kept for the benchmarks that time them.
var defaultGemmGrain, defaultGemmWake = gemmGrain, gemmWake

// TestMain runs the package's tests with the parallel products of small matrices: the
// serial threshold is a tuning figure, and the tests' matrices are small. The
// environment's SUBLET_BENCH_GEMM_PRIVATE, when set, is gemmPrivate, to compare the
// products' private and shared packing in one binary (docs/benchmarks.md).
func TestMain(m *testing.M) {
	gemmGrain, gemmWake = 64*64*64/16, 64*64*64
	cores = maxProcsOfTests
	if v := os.Getenv("SUBLET_BENCH_GEMM_PRIVATE"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 {
			fmt.Fprintf(os.Stderr, "SUBLET_BENCH_GEMM_PRIVATE=%q: want a count of tasks, 1 or more\n", v)
			os.Exit(2)
		}
		gemmPrivate = p
	}
	os.Exit(m.Run())
}
