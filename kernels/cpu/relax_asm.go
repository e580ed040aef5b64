//go:build amd64 || arm64

package cpu

// relax tells the core that the thread is in a spin-wait (PAUSE on amd64, YIELD on
// arm64), as the Go runtime's own spinning and OpenMP's barriers do: the loop stops
// issuing loads as fast as it can, which on a core shared by two hardware threads
// leaves the other thread its issue slots (a worker computing a product beside the
// spinner, or another program's thread), and a hypervisor can tell a spinning vCPU
// from a busy one.
func relax()
