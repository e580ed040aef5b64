//go:build unix

package cpu

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is this process's CPU time so far (user and system, every thread).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ReportCPU runs the benchmark loop body and reports, beside the wall-clock ns/op, the
// process's CPU time per op: on a machine shared with other work, time spent waiting
// for a core counts in the first and not in the second.
func ReportCPU(b *testing.B, body func()) {
	start := processCPU()
	for b.Loop() {
		body()
	}
	b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
}
