//go:build unix

package main

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) this process has used so far, every
// thread together; ok is false where the OS does not say.
func processCPU() (d time.Duration, ok bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
