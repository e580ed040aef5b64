//go:build !unix

package cpu

import "testing"

// ReportCPU runs the benchmark loop body; here the OS gives no CPU time to report.
func ReportCPU(b *testing.B, body func()) {
	for b.Loop() {
		body()
	}
}
