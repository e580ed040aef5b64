//go:build !unix

package cpu_test

import "testing"

// reportCPU runs the benchmark loop body; here the OS gives no CPU time to report.
func reportCPU(b *testing.B, body func()) {
	for b.Loop() {
		body()
	}
}
